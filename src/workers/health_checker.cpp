#include "kvgate/workers/health_checker.hpp"

#include <spdlog/spdlog.h>

namespace kvgate::workers {

using namespace kvgate::http;

struct HealthChecker::Round {
  explicit Round(asio::io_context& io) : timer(io) {}
  std::vector<std::shared_ptr<WorkerState>> workers;
  config::HealthCheckOptions options;
  HealthThresholds thresholds;
  asio::steady_timer timer;
  bool stopped = false;
};

void HealthChecker::watch(std::vector<std::shared_ptr<WorkerState>> workers, const config::HealthCheckOptions& options,
                          const HealthThresholds& thresholds) {
  stop();
  if (!options.enabled) {
    return;
  }
  current_ = std::make_shared<Round>(io_);
  current_->workers = std::move(workers);
  current_->options = options;
  current_->thresholds = thresholds;
  asio::co_spawn(io_, schedule(current_), [](const std::exception_ptr&) {});
}

void HealthChecker::stop() {
  if (current_) {
    current_->stopped = true;
    current_->timer.cancel();
    current_.reset();
  }
}

awaitable<void> HealthChecker::schedule(std::shared_ptr<Round> round) {
  while (!round->stopped) {
    for (const auto& worker : round->workers) {
      asio::co_spawn(io_, check(round, worker), [](const std::exception_ptr&) {});
    }
    round->timer.expires_after(round->options.interval);
    co_await round->timer.async_wait(use_nothrow);
  }
}

awaitable<void> HealthChecker::check(std::shared_ptr<Round> round, std::shared_ptr<WorkerState> worker) {
  bool healthy = co_await probe_http(io_, worker->endpoint(), round->options.path, round->options.timeout);
  if (round->stopped) {
    co_return;
  }
  metrics_.health_check(worker->id(), healthy);
  switch (worker->record_check(healthy, round->thresholds)) {
    case HealthChange::went_down:
      spdlog::warn("worker {} ({}) marked down: {} consecutive failed health checks", worker->id(), worker->url(),
                   round->thresholds.unhealthy_after);
      break;
    case HealthChange::went_up:
      spdlog::info("worker {} ({}) marked up again", worker->id(), worker->url());
      break;
    case HealthChange::none:
      break;
  }
}

awaitable<std::optional<FetchedPage>> fetch_http(asio::io_context& io, const HttpUrl& endpoint, const std::string& path,
                                                 Milliseconds timeout, std::uint64_t body_limit) {
  beast::tcp_stream stream(io);
  stream.expires_after(timeout);
  tcp::resolver resolver(io);
  auto [resolve_error, results] =
      co_await resolver.async_resolve(endpoint.authority.host, std::to_string(endpoint.authority.port), use_nothrow);
  if (resolve_error) {
    co_return std::nullopt;
  }
  auto [connect_error, connected] = co_await stream.async_connect(results, use_nothrow);
  if (connect_error) {
    co_return std::nullopt;
  }
  bhttp::request<bhttp::empty_body> request{bhttp::verb::get, path, 11};
  request.set(bhttp::field::host, endpoint.host_header);
  request.set(bhttp::field::user_agent, "kvgate");
  request.keep_alive(false);
  auto [write_error, written] = co_await bhttp::async_write(stream, request, use_nothrow);
  if (write_error) {
    co_return std::nullopt;
  }
  beast::flat_buffer buffer;
  bhttp::response_parser<bhttp::string_body> parser;
  parser.body_limit(body_limit);
  auto [read_error, read] = co_await bhttp::async_read(stream, buffer, parser, use_nothrow);
  if (read_error) {
    co_return std::nullopt;
  }
  co_return FetchedPage{parser.get().result_int(), std::move(parser.get().body())};
}

awaitable<bool> probe_http(asio::io_context& io, const HttpUrl& endpoint, const std::string& path,
                           Milliseconds timeout) {
  auto page = co_await fetch_http(io, endpoint, path, timeout, 64 * 1024);
  co_return page && page->status >= 200 && page->status < 300;
}

}  // namespace kvgate::workers
