#include "kvgate/workers/health_checker.hpp"

#include <spdlog/spdlog.h>

namespace kvgate::workers {

using namespace kvgate::http;

void HealthChecker::watch(std::vector<std::shared_ptr<WorkerState>> workers, const config::HealthCheckOptions& options,
                          const HealthThresholds& thresholds) {
  rounds_.stop();
  if (!options.enabled) {
    return;
  }
  rounds_.start(std::move(workers), options.interval,
                [this, options, thresholds](std::shared_ptr<WorkerState> worker, std::shared_ptr<const bool> stopped) {
                  return check(std::move(worker), std::move(stopped), options, thresholds);
                });
}

awaitable<void> HealthChecker::check(std::shared_ptr<WorkerState> worker, std::shared_ptr<const bool> stopped,
                                     config::HealthCheckOptions options, HealthThresholds thresholds) {
  bool healthy = co_await probe_http(io_, worker->endpoint(), options.path, options.timeout);
  if (*stopped) {
    co_return;
  }
  worker->series().health_check(healthy);
  switch (worker->health().record_check(healthy, thresholds)) {
    case HealthChange::went_down:
      spdlog::warn("worker {} ({}) marked down: {} consecutive failed health checks", worker->id(), worker->url(),
                   thresholds.unhealthy_after);
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
