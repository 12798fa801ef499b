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

void MetricsScraper::watch(std::vector<std::shared_ptr<WorkerState>> workers,
                           const config::MetricsScrapeOptions& options) {
  rounds_.stop();
  if (!options.enabled) {
    return;
  }
  rounds_.start(std::move(workers), options.interval,
                [this, options](std::shared_ptr<WorkerState> worker, std::shared_ptr<const bool> stopped) {
                  return scrape(std::move(worker), std::move(stopped), options);
                });
}

awaitable<void> MetricsScraper::scrape(std::shared_ptr<WorkerState> worker, std::shared_ptr<const bool> stopped,
                                       config::MetricsScrapeOptions options) {
  auto page = co_await fetch_http(io_, worker->endpoint(), options.path, options.timeout, kMaxMetricsBytes);
  if (*stopped) {
    co_return;
  }
  if (!page || page->status != 200) {
    // Not fatal: the snapshot keeps its time, so readers can tell its age.
    metrics_.metrics_scrape(worker->id(), false);
    spdlog::debug("worker {}: scraping {} failed ({})", worker->id(), options.path,
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
