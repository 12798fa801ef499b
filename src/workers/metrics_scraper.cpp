#include "kvgate/workers/metrics_scraper.hpp"

#include <spdlog/spdlog.h>

#include <chrono>

#include "kvgate/core/clock.hpp"
#include "kvgate/workers/health_checker.hpp"

namespace kvgate::workers {
namespace {

// A worker whose expected first tokens are persistently off, or right
// again: said once per change. Here, with each scrape on the control
// thread, not on the request path (a summary sorts the window).
void report_ttft_calibration(WorkerState& worker) {
  const auto summary = worker.costs().ttft_calibration();
  worker.costs().publish_ttft_calibration(summary);
  const auto cause = likely_ttft_miscalibration(summary);
  const bool off = !cause.empty();
  if (worker.costs().exchange_ttft_flagged(off) == off) {
    return;
  }
  if (off) {
    spdlog::warn(
        "worker {}: expected first tokens are off: the median is {:.2f}x the expected over its last {} "
        "answers (p90 {:.2f}x); {}",
        worker.id(), summary.ratio_p50, summary.samples, summary.ratio_p90, cause);
  } else {
    spdlog::info("worker {}: expected first tokens agree again (median {:.2f}x over its last {} answers)", worker.id(),
                 summary.ratio_p50, summary.samples);
  }
}

}  // namespace

using namespace kvgate::http;

namespace {

// vLLM's exposition with many histograms is ~100-300 KiB; far more is not an
// engine's metrics page.
constexpr std::uint64_t kMaxMetricsBytes = 8 * 1024 * 1024;

std::string format_ms(Milliseconds duration) {
  return std::to_string(duration.count()) + " ms";
}

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
  std::erase_if(ram_cache_seen_, [&](const auto& entry) { return !schedules_.contains(entry.first); });
  std::erase_if(adapters_listed_ms_, [&](const auto& entry) { return !schedules_.contains(entry.first); });
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
  const auto pending_before = worker->load().fleet_pending_requests();
  const auto started_ms = steady_ms();
  const Milliseconds timeout(schedules_[id].timeout_ms(static_cast<std::uint64_t>(target.timeout.count())));
  auto page = co_await fetch_http(io_, worker->endpoint(), options.path, timeout, kMaxMetricsBytes);
  if (*stopped) {
    co_return;
  }
  const bool ok = page && page->status == 200;
  auto found = schedules_.find(id);
  if (found != schedules_.end()) {
    const auto before = found->second.consecutive_failures();
    const auto now = steady_ms();
    found->second.finished(ok, now, static_cast<std::uint64_t>(target.interval.count()),
                           static_cast<std::uint64_t>(options.max_backoff.count()), now - started_ms);
    if (!ok && before == 0) {
      spdlog::warn(
          "worker {}: scraping {} failed ({}); backing off, with a longer timeout (routing uses its own counts until "
          "it answers)",
          id, options.path, page ? "HTTP " + std::to_string(page->status) : "no answer within " + format_ms(timeout));
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
  const auto load = snapshot->load;
  const auto previous = worker->engine().last();
  worker->engine().publish(std::move(snapshot), std::max(pending_before, worker->load().fleet_pending_requests()));
  worker->series().scrape(obs::ScrapeResult::success);
  if (load.adapters) {
    std::vector<std::uint64_t> running;
    std::vector<std::uint64_t> waiting;
    for (const auto& name : load.adapters->running) {
      running.push_back(adapter_hash(name));
    }
    for (const auto& name : load.adapters->waiting) {
      waiting.push_back(adapter_hash(name));
    }
    worker->adapters().publish_report(running, waiting, load.adapters->max_loras);
  }
  // An engine counter that went down is an engine that restarted: what it
  // said of itself (slots) is asked again. Only counters as exported: a
  // difference of two (vLLM's computed tokens) can dip between updates.
  const bool restarted = previous && ((previous->load.prompt_tokens_counter && load.prompt_tokens_counter &&
                                       *load.prompt_tokens_counter < *previous->load.prompt_tokens_counter) ||
                                      (previous->load.prefix_hit_tokens && load.prefix_hit_tokens &&
                                       *load.prefix_hit_tokens < *previous->load.prefix_hit_tokens));
  if (restarted) {
    spdlog::info("worker {}: its engine's counters went down: it restarted", id);
    worker->engine().publish_identity(nullptr);
    worker->engine().restarted();
  }
  report_ttft_calibration(*worker);
  co_await identify(worker, parsed, timeout);
  if (*stopped) {
    co_return;
  }
  if (!target.discover_adapters_of.empty()) {
    auto& listed = adapters_listed_ms_[id];
    if (listed == 0 || steady_ms() >= listed + kAdapterPollMs) {
      listed = steady_ms();
      co_await list_adapters(worker, target.discover_adapters_of, timeout);
      if (*stopped) {
        co_return;
      }
    }
  }
  const auto verdict = worker->costs().ram_cache();
  auto& seen = ram_cache_seen_[id];
  if (verdict != seen) {
    seen = verdict;
    if (on_engine_change_) {
      on_engine_change_();
    }
  }
}

awaitable<void> MetricsScraper::list_adapters(const std::shared_ptr<WorkerState>& worker, const std::string& base_model,
                                              Milliseconds timeout) {
  constexpr std::uint64_t kMaxModelsBytes = 4 * 1024 * 1024;
  auto page = co_await fetch_http(io_, worker->endpoint(), "/v1/models", timeout, kMaxModelsBytes);
  if (!page || page->status != 200) {
    co_return;  // asked again at the next poll; what was listed stays
  }
  auto adapters = parse_served_adapters(page->body, base_model);
  if (!adapters) {
    spdlog::warn("worker {}: /v1/models: {}", worker->id(), adapters.error());
    co_return;
  }
  if (worker->engine().publish_served_adapters(std::move(*adapters)) && on_engine_change_) {
    on_engine_change_();
  }
}

awaitable<void> MetricsScraper::identify(const std::shared_ptr<WorkerState>& worker, const ParsedMetrics& parsed,
                                         Milliseconds timeout) {
  const auto kind = engine_kind_from_metrics(parsed);
  if (!kind) {
    co_return;  // not an engine this gateway knows by its names: the configuration says what it is
  }
  const auto known = worker->engine().identity();
  if (known && known->kind == *kind) {
    co_return;
  }
  EngineIdentity identity;
  identity.kind = *kind;
  identity.evidence = "/metrics names (" + std::string(config::to_string(*kind)) + ":*)";
  if (*kind == config::EngineKind::llamacpp) {
    // A small page, but served by the same busy server.
    constexpr std::uint64_t kMaxPropsBytes = 4 * 1024 * 1024;
    auto props_page = co_await fetch_http(io_, worker->endpoint(), "/props", timeout, kMaxPropsBytes);
    if (!props_page || props_page->status != 200) {
      spdlog::warn("worker {}: llama-server's /props did not answer ({}); its slots are asked again at the next scrape",
                   worker->id(), props_page ? "HTTP " + std::to_string(props_page->status) : std::string("no answer"));
      co_return;
    }
    auto props = parse_llamacpp_props(props_page->body);
    if (!props) {
      spdlog::warn("worker {}: llama-server's /props: {}", worker->id(), props.error());
      co_return;
    }
    identity.evidence += " and /props";
    identity.slots = props->total_slots;
    identity.slot_context_tokens = props->slot_context_tokens;
    identity.build = props->build;
  }
  spdlog::info("worker {}: the engine is {} (from its {}{})", worker->id(), config::to_string(identity.kind),
               identity.evidence, identity.slots ? ", " + std::to_string(*identity.slots) + " slots" : std::string());
  worker->engine().publish_identity(std::make_shared<const EngineIdentity>(std::move(identity)));
  if (on_engine_change_) {
    on_engine_change_();
  }
}

}  // namespace kvgate::workers
