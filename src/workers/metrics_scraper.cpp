#include "kvgate/workers/metrics_scraper.hpp"

#include <spdlog/spdlog.h>

#include <chrono>

#include "kvgate/workers/health_checker.hpp"

namespace kvgate::workers {

using namespace kvgate::http;

namespace {

// vLLM's exposition with many histograms is ~100-300 KiB; far more is not an
// engine's metrics page.
constexpr std::uint64_t kMaxMetricsBytes = 8 * 1024 * 1024;

std::uint64_t unix_ms() {
  return static_cast<std::uint64_t>(
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
          .count());
}

}  // namespace

struct MetricsScraper::Round {
  explicit Round(asio::io_context& io) : timer(io) {}
  std::vector<std::shared_ptr<WorkerState>> workers;
  config::MetricsScrapeOptions options;
  asio::steady_timer timer;
  bool stopped = false;
};

void MetricsScraper::watch(std::vector<std::shared_ptr<WorkerState>> workers,
                           const config::MetricsScrapeOptions& options) {
  stop();
  if (!options.enabled) {
    return;
  }
  current_ = std::make_shared<Round>(io_);
  current_->workers = std::move(workers);
  current_->options = options;
  asio::co_spawn(io_, schedule(current_), [](const std::exception_ptr&) {});
}

void MetricsScraper::stop() {
  if (current_) {
    current_->stopped = true;
    current_->timer.cancel();
    current_.reset();
  }
}

awaitable<void> MetricsScraper::schedule(std::shared_ptr<Round> round) {
  while (!round->stopped) {
    for (const auto& worker : round->workers) {
      asio::co_spawn(io_, scrape(round, worker), [](const std::exception_ptr&) {});
    }
    round->timer.expires_after(round->options.interval);
    co_await round->timer.async_wait(use_nothrow);
  }
}

awaitable<void> MetricsScraper::scrape(std::shared_ptr<Round> round, std::shared_ptr<WorkerState> worker) {
  auto page =
      co_await fetch_http(io_, worker->endpoint(), round->options.path, round->options.timeout, kMaxMetricsBytes);
  if (round->stopped) {
    co_return;
  }
  if (!page || page->status != 200) {
    // Not fatal: the snapshot keeps its time, so readers can tell its age.
    metrics_.metrics_scrape(worker->id(), false);
    spdlog::debug("worker {}: scraping {} failed ({})", worker->id(), round->options.path,
                  page ? "HTTP " + std::to_string(page->status) : std::string("no answer"));
    co_return;
  }
  auto parsed = parse_prometheus_text(page->body);
  auto snapshot = std::make_shared<WorkerState::ScrapedLoad>();
  snapshot->load = extract_engine_load(parsed);
  snapshot->unix_ms = unix_ms();
  worker->publish_engine_load(std::move(snapshot));
  metrics_.metrics_scrape(worker->id(), true);
}

}  // namespace kvgate::workers
