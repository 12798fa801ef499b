#pragma once
// Scrapes every worker's Prometheus /metrics on an interval and publishes
// the engine's load signals (running, waiting, KV usage, prefix-cache
// counters, block size, GPU blocks) as an immutable snapshot in its
// WorkerState, where the policy and the index writer read them without
// locks. Runs on the control thread's io_context, like the health checker.
// Each worker has its own interval and timeout, one scrape at a time, and
// backs off while its endpoint fails (scrape_schedule.hpp); a failed
// scrape only ages the snapshot, never the worker's health.
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "kvgate/config/options.hpp"
#include "kvgate/http/beast.hpp"
#include "kvgate/workers/periodic_rounds.hpp"
#include "kvgate/workers/scrape_schedule.hpp"
#include "kvgate/workers/scrape_target.hpp"
#include "kvgate/workers/worker_state.hpp"

namespace kvgate::workers {

class MetricsScraper {
 public:
  explicit MetricsScraper(http::asio::io_context& io) : io_(io), rounds_(io) {}

  // Replaces the scraped set (start-up and every reload). Control thread only.
  void watch(std::vector<ScrapeTarget> targets, const config::MetricsScrapeOptions& options);
  void stop() { rounds_.stop(); }

 private:
  http::awaitable<void> scrape(std::shared_ptr<WorkerState> worker, std::shared_ptr<const bool> stopped,
                               ScrapeTarget target, config::MetricsScrapeOptions options);

  http::asio::io_context& io_;
  PeriodicRounds rounds_;
  // By worker id; control thread only. Kept across reloads for the workers
  // that stay, so a reload does not forget a back-off.
  std::unordered_map<std::string, ScrapeSchedule> schedules_;
};

}  // namespace kvgate::workers
