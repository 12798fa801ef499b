#include "kvgate/workers/metrics_scraper.hpp"

#include <spdlog/spdlog.h>

#include <chrono>

#include "kvgate/core/clock.hpp"
#include "kvgate/workers/health_checker.hpp"

namespace kvgate::workers {

using namespace kvgate::http;

namespace {

// vLLM's exposition with many histograms is ~100-300 KiB; far more is not an
// engine's metrics page.
constexpr std::uint64_t kMaxMetricsBytes = 8 * 1024 * 1024;

std::uint64_t steady_ms() {
  return static_cast<std::uint64_t>(
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now().time_since_epoch())
          .count());
}

}  // namespace

void MetricsScraper::watch(std::vector<ScrapeTarget> targets, const config::MetricsScrapeOptions& options) {
  rounds_.stop();
  std::unordered_map<std::string, ScrapeSchedule> kept;
  for (const auto& target : targets) {
    if (auto found = schedules_.find(target.worker->id()); found != schedules_.end()) {
      auto schedule = found->second;
      schedule.abandoned();  // a stopped round's scrape never reports back
      kept.emplace(target.worker->id(), schedule);
    }
  }
  schedules_ = std::move(kept);
  if (!options.enabled || targets.empty()) {
    return;
  }
  // Rounds tick at the shortest interval; each worker's schedule says
  // whether its turn has come.
  auto tick = options.interval;
  std::vector<std::shared_ptr<WorkerState>> workers;
  std::unordered_map<const WorkerState*, ScrapeTarget> by_worker;
  for (const auto& target : targets) {
    tick = std::min(tick, target.interval);
    workers.push_back(target.worker);
    by_worker.emplace(target.worker.get(), target);
  }
  rounds_.start(std::move(workers), tick,
                [this, options, by_worker = std::move(by_worker)](std::shared_ptr<WorkerState> worker,
                                                                  std::shared_ptr<const bool> stopped) {
                  const auto& target = by_worker.at(worker.get());
                  return scrape(std::move(worker), std::move(stopped), target, options);
                });
}

awaitable<void> MetricsScraper::scrape(std::shared_ptr<WorkerState> worker, std::shared_ptr<const bool> stopped,
                                       ScrapeTarget target, config::MetricsScrapeOptions options) {
  const std::string id = worker->id();
  {
    auto& schedule = schedules_[id];
    if (!schedule.due(steady_ms())) {
      if (schedule.in_flight()) {
        worker->series().scrape(obs::ScrapeResult::skipped);  // the last one has not answered yet
      }
      co_return;
    }
    schedule.started();
  }
  const auto pending_before = worker->load().pending_requests();
  auto page = co_await fetch_http(io_, worker->endpoint(), options.path, target.timeout, kMaxMetricsBytes);
  if (*stopped) {
    co_return;
  }
  const bool ok = page && page->status == 200;
  auto found = schedules_.find(id);
  if (found != schedules_.end()) {
    const auto before = found->second.consecutive_failures();
    found->second.finished(ok, steady_ms(), static_cast<std::uint64_t>(target.interval.count()),
                           static_cast<std::uint64_t>(options.max_backoff.count()));
    if (!ok && before == 0) {
      spdlog::warn("worker {}: scraping {} failed ({}); backing off (routing uses its own counts until it answers)", id,
                   options.path, page ? "HTTP " + std::to_string(page->status) : std::string("no answer in time"));
    } else if (ok && before > 0) {
      spdlog::info("worker {}: {} answers again after {} failed scrapes", id, options.path, before);
    }
  }
  if (!ok) {
    // Not fatal: the snapshot keeps its time, so readers can tell its age.
    worker->series().scrape(obs::ScrapeResult::failure);
    co_return;
  }
  auto parsed = parse_prometheus_text(page->body);
  auto snapshot = std::make_shared<EngineView::Scrape>();
  snapshot->load = extract_engine_load(parsed);
  snapshot->scraped_ms = monotonic_now_ms();
  worker->engine().publish(std::move(snapshot), std::max(pending_before, worker->load().pending_requests()));
  worker->series().scrape(obs::ScrapeResult::success);
}

}  // namespace kvgate::workers
