#pragma once
// Every Prometheus series labelled with one worker, declared here beside
// each other (Envoy's per-host stats): a worker's series live exactly as
// long as the worker. Each WorkerSeries owns a registry of its own; the
// gateway's exposition (obs::Exposition::serialize) merges the registries of
// the workers in the current routing table, so a worker that leaves the
// configuration or discovery leaves /metrics at once, and its memory goes
// with the last request that still held it.
//
// Every series whose label values are known in advance (error kinds,
// results, outcomes, event types) exists from the start at 0: a fresh
// gateway exposes every family its dashboard and alerts query (Prometheus's
// guidance for labelled counters).
//
// Threading: every method may be called from any thread (prometheus-cpp's
// counters and gauges are atomics; the per-status request counters are
// created once under the family's lock and then read lock-free).
#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kvgate/policy/reason.hpp"

namespace kvgate::obs {

// The ways talking to a worker fails (kvgate_upstream_errors_total{kind}).
enum class UpstreamErrorKind : std::uint8_t {
  connect,
  connect_timeout,
  timeout,
  reset,
  status_5xx,
  stream_interrupted
};
inline constexpr std::array kUpstreamErrorKinds{UpstreamErrorKind::connect,    UpstreamErrorKind::connect_timeout,
                                                UpstreamErrorKind::timeout,    UpstreamErrorKind::reset,
                                                UpstreamErrorKind::status_5xx, UpstreamErrorKind::stream_interrupted};
std::string_view to_string(UpstreamErrorKind kind);

// The outcome of one round's visit to a worker's /metrics.
enum class ScrapeResult : std::uint8_t { success, failure, skipped };
std::string_view to_string(ScrapeResult result);

// A routed request's predicted cached tokens against the engine's figure.
enum class PredictionOutcome : std::uint8_t { exact, over, under };
std::string_view to_string(PredictionOutcome outcome);

// KV-cache event types as counted (kvgate_kv_events_total{type}).
enum class KvEventType : std::uint8_t { block_stored, block_removed, all_blocks_cleared, unknown, malformed };
std::string_view to_string(KvEventType type);

// Seconds; spans a cached short prompt (ms) to a long generation (minutes).
const prometheus::Histogram::BucketBoundaries& latency_buckets();

class WorkerSeries {
 public:
  // `model`: the model the worker serves (the request series' model label).
  WorkerSeries(std::string_view model, std::string_view worker);
  WorkerSeries(const WorkerSeries&) = delete;
  WorkerSeries& operator=(const WorkerSeries&) = delete;

  [[nodiscard]] const prometheus::Registry& registry() const { return *registry_; }

  // The data plane.
  void request_finished(int status, double first_token_seconds);
  void upstream_error(UpstreamErrorKind kind) { upstream_errors_[static_cast<std::size_t>(kind)]->Increment(); }
  void prompt_tokens(std::uint32_t prompt, std::uint32_t cached);
  // A request for a LoRA adapter placed here, by where the adapter stood
  // at the decision (base-model requests are not counted).
  void adapter_placement(policy::AdapterState state) {
    if (auto* counter = adapter_placements_[static_cast<std::size_t>(state)]) {
      counter->Increment();
    }
  }
  void cache_prediction(PredictionOutcome outcome) {
    cache_predictions_[static_cast<std::size_t>(outcome)]->Increment();
  }
  // The failure cause's name (workers::to_string(FailureCause)): connect,
  // status_5xx, reset or timeout.
  void ejected(std::string_view cause);

  // The control thread.
  void health_check(bool success) { (success ? health_success_ : health_failure_)->Increment(); }
  void scrape(ScrapeResult result) { scrapes_[static_cast<std::size_t>(result)]->Increment(); }

  // The index writer thread.
  prometheus::Counter& kv_events(KvEventType type) { return *kv_events_[static_cast<std::size_t>(type)]; }
  void kv_event_gap() { gaps_->Increment(); }
  void kv_event_replay(bool closed) { (closed ? replays_closed_ : replays_failed_)->Increment(); }
  void kv_event_reset() { resets_->Increment(); }
  void kv_event_decode_error() { decode_errors_->Increment(); }
  void index_unindexable(std::uint64_t blocks) { unindexable_->Increment(static_cast<double>(blocks)); }

  // Gauges set when /metrics is read (from the worker's atomics), and the
  // drift flag when it changes.
  struct State {
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
    bool drifting = false;
    // Realized over expected first tokens (workers/ttft_calibration.hpp);
    // absent until a clean streamed answer was priced.
    struct TtftCalibration {
      std::uint32_t samples = 0;
      double ratio_p50 = 0;
      double ratio_p90 = 0;
      double relative_error_p50 = 0;
    };
    std::optional<TtftCalibration> ttft_calibration;
  };
  void set_state(const State& state);
  struct EventStreamState {
    bool configured = false;  // the worker has a kv_events endpoint
    bool connected = false;
    bool stale = false;
    bool silent = false;
    std::uint64_t index_blocks = 0;
  };
  void set_event_stream_state(const EventStreamState& state);
  void set_drifting(bool drifting) { drifting_->Set(drifting ? 1 : 0); }

 private:
  static constexpr int kStatuses = 600;  // HTTP statuses 0 (no answer) to 599

  std::string model_;
  std::string worker_;
  std::shared_ptr<prometheus::Registry> registry_;
  prometheus::Family<prometheus::Counter>* requests_;
  std::array<std::atomic<prometheus::Counter*>, kStatuses> requests_by_status_{};
  prometheus::Histogram* first_token_;
  std::array<prometheus::Counter*, kUpstreamErrorKinds.size()> upstream_errors_{};
  prometheus::Counter* prompt_tokens_;
  prometheus::Counter* cached_prompt_tokens_;
  std::array<prometheus::Counter*, 3> cache_predictions_{};
  prometheus::Family<prometheus::Counter>* ejections_;
  prometheus::Counter* health_success_;
  prometheus::Counter* health_failure_;
  std::array<prometheus::Counter*, 3> scrapes_{};
  std::array<prometheus::Counter*, 5> kv_events_{};
  prometheus::Counter* gaps_;
  prometheus::Counter* replays_closed_;
  prometheus::Counter* replays_failed_;
  prometheus::Counter* resets_;
  prometheus::Counter* decode_errors_;
  prometheus::Counter* unindexable_;
  // By policy::AdapterState; base's stays null.
  std::array<prometheus::Counter*, 5> adapter_placements_{};
  prometheus::Gauge* up_;
  prometheus::Gauge* in_flight_;
  prometheus::Gauge* pending_prefill_;
  prometheus::Family<prometheus::Gauge>* recent_ttft_;
  prometheus::Family<prometheus::Gauge>* ttft_calibration_;
  prometheus::Gauge* prefill_per_token_;
  prometheus::Gauge* prefill_per_token_pair_;
  prometheus::Gauge* prefill_base_;
  prometheus::Gauge* prefill_samples_;
  prometheus::Gauge* ejected_;
  prometheus::Gauge* drifting_;
  prometheus::Gauge* index_blocks_;
  prometheus::Family<prometheus::Gauge>* connected_;
  prometheus::Family<prometheus::Gauge>* stale_;
  prometheus::Family<prometheus::Gauge>* silent_;
};

}  // namespace kvgate::obs
