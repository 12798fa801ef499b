#pragma once
// Scrapes every worker's Prometheus /metrics on an interval and publishes
// the engine's load signals (running, waiting, KV usage, prefix-cache
// counters, block size, GPU blocks) as an immutable snapshot in its
// WorkerState, where the policy and the index writer read them without
// locks. Runs on the control thread's io_context, like the health checker.
// Each worker has its own interval and timeout, one scrape at a time, and
// backs off while its endpoint fails (scrape_schedule.hpp); a failed
// scrape only ages the snapshot, never the worker's health.
//
// The scrape also tells what the engine is (engine_identity.hpp): its
// metric names give the kind, and for llama-server GET /props gives the
// slots, asked again when the engine's counters show a restart. When that
// or the worker's RAM-cache verdict (from its answers) changes,
// `on_engine_change` runs (control thread), so the gateway can re-model
// the worker.
#include <functional>
#include <memory>
#include <optional>
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

  // Set once before the first watch().
  void on_engine_change(std::function<void()> callback) { on_engine_change_ = std::move(callback); }

  // Replaces the scraped set (start-up and every reload). Control thread only.
  void watch(std::vector<ScrapeTarget> targets, const config::MetricsScrapeOptions& options);
  void stop() { rounds_.stop(); }

 private:
  http::awaitable<void> scrape(std::shared_ptr<WorkerState> worker, std::shared_ptr<const bool> stopped,
                               ScrapeTarget target, config::MetricsScrapeOptions options);
  // What the scrape says the engine is; asks /props when it needs to.
  http::awaitable<void> identify(const std::shared_ptr<WorkerState>& worker, const ParsedMetrics& parsed,
                                 Milliseconds timeout);
  // The adapters the engine lists (models[].discover_adapters).
  http::awaitable<void> list_adapters(const std::shared_ptr<WorkerState>& worker, const std::string& base_model,
                                      Milliseconds timeout);

  http::asio::io_context& io_;
  PeriodicRounds rounds_;
  // By worker id; control thread only. Kept across reloads for the workers
  // that stay, so a reload does not forget a back-off.
  std::unordered_map<std::string, ScrapeSchedule> schedules_;
  // The RAM-cache verdict last reported per worker id (control thread).
  std::unordered_map<std::string, std::optional<bool>> ram_cache_seen_;
  std::function<void()> on_engine_change_;
  // When each worker's /v1/models was last read (control thread), by id.
  std::unordered_map<std::string, std::uint64_t> adapters_listed_ms_;

 public:
  // Between two reads of a worker's /v1/models: adapters come and go at
  // the pace of deployments, not of load.
  static constexpr std::uint64_t kAdapterPollMs = 5'000;
};

}  // namespace kvgate::workers
