#pragma once
// kvgate's own Prometheus metrics. Names follow Prometheus conventions:
// prefix kvgate_, unit in the name, counters end in _total. Families are
// created once; label children are looked up per event (prometheus-cpp keeps
// them in a mutex-guarded map), except the series counted on every request,
// whose children each thread looks up once (ThreadMetrics below, and the
// per-request counters of metrics.cpp).
#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>

namespace kvgate::obs {

// The outcome of one round's visit to a worker's /metrics.
enum class ScrapeResult { success, failure, skipped };
[[nodiscard]] constexpr std::string_view to_string(ScrapeResult result) {
  switch (result) {
    case ScrapeResult::success:
      return "success";
    case ScrapeResult::failure:
      return "failure";
    case ScrapeResult::skipped:
      return "skipped";
  }
  return "failure";
}

// Label children by a string key, looked up with a string_view (no copy of
// the reused key buffer per lookup): the per-thread handle tables below and
// in metrics.cpp.
struct SeriesKeyHash {
  using is_transparent = void;
  std::size_t operator()(std::string_view key) const { return std::hash<std::string_view>{}(key); }
};
template <class Handles>
using SeriesMap = std::unordered_map<std::string, Handles, SeriesKeyHash, std::equal_to<>>;

class Metrics {
 public:
  Metrics();

  // The label children of one (model, worker, status) request series.
  struct RequestSeries {
    prometheus::Counter* count = nullptr;
    prometheus::Histogram* duration = nullptr;
    prometheus::Histogram* first_byte = nullptr;
    prometheus::Histogram* first_token = nullptr;  // by model and worker
  };
  RequestSeries request_series(std::string_view model, std::string_view worker, int status);

  void upstream_error(std::string_view worker, std::string_view kind);
  void retry(std::string_view model);
  // A retry the retry budget refused (the client got the last error).
  void retry_denied(std::string_view model);
  // Admission control (proxy/admission_gate.hpp).
  void admission_refused(std::string_view tenant, std::string_view reason);
  void admission_waited(std::string_view tenant, double seconds);
  void set_admission_state(std::size_t waiting, std::uint32_t admitted);
  // A worker ejected by its circuit breaker, and why.
  void worker_ejected(std::string_view worker, std::string_view cause);
  void client_error(int status, std::string_view code);
  void connection_rejected();
  void health_check(std::string_view worker, bool success);
  void metrics_scrape(std::string_view worker, ScrapeResult result);
  void config_reload(bool success);

  // KV-event ingestion (the index writer thread).
  prometheus::Counter& kv_events(std::string_view worker, std::string_view type);
  void kv_event_gap(std::string_view worker);
  void kv_event_replay(std::string_view worker, bool closed);
  void kv_event_reset(std::string_view worker);
  void kv_event_decode_error(std::string_view worker);
  void index_evictions(std::uint64_t entries);
  void index_unindexable(std::string_view worker, std::uint64_t blocks);
  // Gauges refreshed when /metrics is scraped.
  struct EventStreamGauges {
    bool configured = false;
    bool connected = false;
    bool stale = false;
    bool silent = false;
    std::uint64_t index_blocks = 0;
  };
  void set_event_stream_state(std::string_view worker, const EventStreamGauges& state);

  // A routed request whose engine reported its cached tokens: kvgate's
  // prediction was "exact", "over" or "under" what the engine reported.
  void cache_prediction(std::string_view worker, std::string_view outcome);
  // 1 while the worker's predictions drift (route/README.md).
  void set_index_drifting(std::string_view worker, bool drifting);

  // Sessions (the router): a turn that left its session's previous worker,
  // by reason; the engine-reported hit ratio of turns 2 and later; the
  // sessions seen within their idle TTL (refreshed when /metrics is read).
  void session_move(std::string_view model, std::string_view reason);
  void session_turn_hit(std::string_view model, double ratio);
  // models[].workers_from: workers a source (dns, file) last returned, and
  // lookups or reads that failed (the last good list is kept).
  void discovered_workers(std::string_view model, std::string_view source, std::size_t workers);
  void discovery_error(std::string_view model, std::string_view source);
  // A routed request answered 200 with the engine's usage: its prompt
  // tokens and those the engine reported cached (the hit rate's two sides).
  void prompt_tokens(std::string_view model, std::string_view worker, std::uint32_t prompt, std::uint32_t cached);
  void set_sessions_active(std::size_t sessions);

  // Exact tokenisation of a request: sections served from the segment cache
  // and sections encoded, template loop iterations replayed from the render
  // cache and evaluated; template errors answered with a 400.
  struct PromptCacheCounters {
    prometheus::Counter* segment_hits;
    prometheus::Counter* segment_misses;
    prometheus::Counter* iterations_replayed;
    prometheus::Counter* iterations_evaluated;
  };
  PromptCacheCounters prompt_cache_counters(std::string_view model);
  void template_error(std::string_view model);

  prometheus::Gauge& in_flight_requests() { return *in_flight_requests_; }
  prometheus::Gauge& open_connections() { return *open_connections_; }
  struct WorkerGauges {
    bool up = true;
    std::uint32_t in_flight = 0;
    std::uint64_t pending_prefill_tokens = 0;
    std::optional<double> recent_ttft_seconds;  // absent: no streamed answer yet
    // The learned prefill cost (policy/prefill_rates.hpp) and its samples.
    double prefill_ms_per_token = 0;
    double prefill_ms_per_token_pair = 0;
    double prefill_base_ms = 0;
    std::uint64_t prefill_samples = 0;
    bool ejected = false;  // out of routing after traffic failures
  };
  void set_worker_state(std::string_view worker, const WorkerGauges& state);
  void forget_worker(std::string_view worker);

  // Prometheus text exposition of everything registered.
  [[nodiscard]] std::string serialize() const;

 private:
  std::uint64_t serial_;  // unique per Metrics in the process: keys the per-thread handles of metrics.cpp
  std::shared_ptr<prometheus::Registry> registry_;
  prometheus::Family<prometheus::Counter>& requests_;
  prometheus::Family<prometheus::Histogram>& request_duration_;
  prometheus::Family<prometheus::Histogram>& first_byte_;
  prometheus::Family<prometheus::Histogram>* first_token_ = nullptr;
  prometheus::Family<prometheus::Counter>& upstream_errors_;
  prometheus::Family<prometheus::Counter>& retries_;
  prometheus::Family<prometheus::Counter>& client_errors_;
  prometheus::Family<prometheus::Counter>& health_checks_;
  prometheus::Family<prometheus::Counter>& metrics_scrapes_;
  prometheus::Family<prometheus::Counter>& config_reloads_;
  prometheus::Family<prometheus::Gauge>& worker_up_;
  prometheus::Family<prometheus::Gauge>& worker_in_flight_;
  prometheus::Family<prometheus::Gauge>& worker_pending_prefill_;
  prometheus::Family<prometheus::Gauge>& worker_recent_ttft_;
  prometheus::Family<prometheus::Counter>& kv_events_;
  prometheus::Family<prometheus::Counter>& kv_event_gaps_;
  prometheus::Family<prometheus::Counter>& kv_event_replays_;
  prometheus::Family<prometheus::Counter>& kv_event_resets_;
  prometheus::Family<prometheus::Counter>& kv_event_decode_errors_;
  prometheus::Family<prometheus::Counter>& index_unindexable_;
  prometheus::Family<prometheus::Gauge>& kv_events_connected_;
  prometheus::Family<prometheus::Gauge>& kv_events_stale_;
  prometheus::Family<prometheus::Gauge>& kv_events_silent_;
  prometheus::Family<prometheus::Gauge>& index_blocks_;
  prometheus::Family<prometheus::Counter>& cache_predictions_;
  prometheus::Family<prometheus::Gauge>* index_drifting_ = nullptr;
  prometheus::Family<prometheus::Gauge>* prefill_ms_per_token_ = nullptr;
  prometheus::Family<prometheus::Gauge>* prefill_ms_per_token_pair_ = nullptr;
  prometheus::Family<prometheus::Gauge>* prefill_base_ms_ = nullptr;
  prometheus::Family<prometheus::Gauge>* prefill_samples_ = nullptr;
  prometheus::Family<prometheus::Counter>* retries_denied_ = nullptr;
  prometheus::Family<prometheus::Counter>* admission_rejections_ = nullptr;
  prometheus::Family<prometheus::Histogram>* admission_wait_ = nullptr;
  prometheus::Gauge* admission_queue_ = nullptr;
  prometheus::Gauge* admission_admitted_ = nullptr;
  prometheus::Family<prometheus::Counter>* worker_ejections_ = nullptr;
  prometheus::Family<prometheus::Gauge>* worker_ejected_ = nullptr;
  prometheus::Family<prometheus::Counter>* session_moves_ = nullptr;
  prometheus::Family<prometheus::Histogram>* session_turn_hit_ = nullptr;
  prometheus::Family<prometheus::Counter>* prompt_tokens_ = nullptr;
  prometheus::Family<prometheus::Gauge>* discovered_workers_ = nullptr;
  prometheus::Family<prometheus::Counter>* discovery_errors_ = nullptr;
  prometheus::Family<prometheus::Counter>* cached_prompt_tokens_ = nullptr;
  prometheus::Gauge* sessions_active_ = nullptr;
  prometheus::Family<prometheus::Counter>* prompt_segments_ = nullptr;
  prometheus::Family<prometheus::Counter>* template_iterations_ = nullptr;
  prometheus::Family<prometheus::Counter>* template_errors_ = nullptr;
  prometheus::Counter* index_evictions_;
  prometheus::Counter* connections_rejected_;
  prometheus::Gauge* in_flight_requests_;
  prometheus::Gauge* open_connections_;
};

// One I/O thread's handles to request series, so the request path skips
// prometheus-cpp's label-map construction and family mutex after the first
// request of each series. Not thread-safe: one per thread. Bounded because
// every label comes from the config or a fixed set (unknown models count as
// "none", never as the client's string).
class ThreadMetrics {
 public:
  explicit ThreadMetrics(Metrics& metrics) : metrics_(metrics) {}

  // `first_token_seconds`: a stream's first data event (< 0: not a stream,
  // or none).
  void request_finished(std::string_view model, std::string_view worker, int status, double duration_seconds,
                        double first_byte_seconds, double first_token_seconds);
  // What the caches of exact tokenisation did for one prompt.
  struct PromptCacheCounts {
    std::uint64_t segment_hits = 0;  // sections served from / added to the segment cache
    std::uint64_t segment_misses = 0;
    std::uint64_t iterations_replayed = 0;  // template loop iterations replayed from / evaluated past the render cache
    std::uint64_t iterations_evaluated = 0;
  };
  void prompt_caches(std::string_view model, const PromptCacheCounts& counts);

 private:
  Metrics& metrics_;
  std::string key_;  // reused lookup buffer
  SeriesMap<Metrics::RequestSeries> series_;
  SeriesMap<Metrics::PromptCacheCounters> prompt_caches_;
};

}  // namespace kvgate::obs
