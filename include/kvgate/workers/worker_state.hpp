#pragma once
// Live state of one worker (engine replica), shared by the I/O threads, the
// control thread and the index writer, split by who writes it. Each part
// below states its writer and how readers see it; nothing is written by
// two kinds of thread. A reload keeps the same WorkerState for a worker
// whose id and URL did not change, so its health, load and learning survive
// the reload.
//
//   part            written by                             read by
//   load()          I/O threads (dispatch, answers)        router, admin
//   health()        control thread (active checks)         router, admin
//   breaker()       I/O threads (a try's outcome)          router, admission, admin
//   engine()        control thread (the /metrics scraper)  router, admin
//   event_stream()  the index writer thread                router, admin
//   costs()         I/O threads (a response's outcome),    router, admin
//                   the cluster's reader (peers' answers)
#include <algorithm>
#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <utility>

#include "kvgate/core/address.hpp"
#include "kvgate/obs/worker_series.hpp"
#include "kvgate/policy/congestion.hpp"
#include "kvgate/policy/eviction.hpp"
#include "kvgate/policy/prefill_fit.hpp"
#include "kvgate/policy/slot_reuse.hpp"
#include "kvgate/policy/slot_wait.hpp"
#include "kvgate/workers/adapter_residency.hpp"
#include "kvgate/workers/engine_identity.hpp"
#include "kvgate/workers/engine_prefill_level.hpp"
#include "kvgate/workers/learned_prefill.hpp"
#include "kvgate/workers/outlier_ejection.hpp"
#include "kvgate/workers/prediction_drift.hpp"
#include "kvgate/workers/prometheus_text.hpp"
#include "kvgate/workers/slot_holds.hpp"
#include "kvgate/workers/slot_occupancy.hpp"
#include "kvgate/workers/ttft_calibration.hpp"

namespace kvgate::workers {

struct HealthThresholds {
  std::uint32_t unhealthy_after = 3;  // consecutive failed active checks
  std::uint32_t healthy_after = 2;    // consecutive good active checks
};

enum class HealthChange { none, went_down, went_up };

// The state of a worker's KV-event stream, written by the ingestion thread
// and read by /debug/workers and /metrics. Each field is an independent
// atomic: a reader may see one field newer than another, never a torn one.
struct EventStreamStatus {
  std::atomic<bool> connected{false};  // the SUB socket has a live connection
  std::atomic<bool> stale{false};      // a gap replay could not close; approximate mode meanwhile
  std::atomic<bool> silent{false};     // traffic but no events for kv_events.silence_after
  std::atomic<std::int64_t> last_sequence{-1};
  std::atomic<std::uint64_t> batches{0};
  std::atomic<std::uint64_t> gaps{0};
  std::atomic<std::uint64_t> replays{0};
  std::atomic<std::uint64_t> failed_replays{0};
  std::atomic<std::uint64_t> resets{0};
  std::atomic<std::uint64_t> decode_errors{0};
  std::atomic<std::uint64_t> last_event_unix_ms{0};
  std::atomic<std::uint64_t> engine_blocks{0};   // blocks the engine reported holding
  std::atomic<std::uint64_t> assumed_blocks{0};  // routing-time inserts still alive
  // GPU blocks the engine reported evicting, ever (BlockRemoved, or all of
  // them at a cache reset): what explains an over-prediction
  // (prediction_drift.hpp).
  std::atomic<std::uint64_t> evicted_blocks{0};
  // cache_aware's eviction input (policy/eviction.hpp), each ingestion tick:
  // GPU blocks the index credits the worker, its KV capacity in blocks, and
  // (while it is at least half full, the only time a placement can evict)
  // the same blocks by idle age as of gpu_block_ages_ms (monotonic). A reader may
  // mix buckets of two ticks: an estimate, never a torn count.
  std::atomic<std::uint64_t> gpu_blocks{0};
  std::atomic<std::uint64_t> capacity_blocks{0};
  std::array<std::atomic<std::uint64_t>, policy::kAgeBuckets> gpu_block_ages{};
  std::atomic<std::uint64_t> gpu_block_ages_ms{0};
  // A worker that keeps whole prompts in slots (cache_model: sequences), as
  // the index writer models it: slots running a request, and requests
  // waiting for one.
  std::atomic<std::uint32_t> slots_busy{0};
  std::atomic<std::uint32_t> slots_waiting{0};

  // `placing_blocks`: the most blocks the caller will price placing here.
  // When they fit in the free room no placement evicts, and eviction_cost()
  // never reads the ages: they are left empty, which spares the router 20
  // loads per worker per decision.
  // An unknown capacity (0) has no eviction term either. Without
  // `placing_blocks` (/debug/workers) the ages are always read.
  static constexpr std::uint64_t kAnyPlacement = UINT64_MAX;
  [[nodiscard]] policy::LruProfile lru_profile(std::uint64_t now_ms,
                                               std::uint64_t placing_blocks = kAnyPlacement) const {
    policy::LruProfile profile;
    read_lru_profile(now_ms, placing_blocks, profile);
    return profile;
  }
  // The same into `profile`, whose ages must be empty (the router fills the
  // views it keeps per thread in place, without a copy per worker).
  void read_lru_profile(std::uint64_t now_ms, std::uint64_t placing_blocks, policy::LruProfile& profile) const {
    profile.held_blocks = gpu_blocks.load(std::memory_order_relaxed);
    profile.capacity_blocks = capacity_blocks.load(std::memory_order_relaxed);
    const bool fits =
        placing_blocks <= profile.capacity_blocks && profile.held_blocks <= profile.capacity_blocks - placing_blocks;
    if (placing_blocks != kAnyPlacement && (profile.capacity_blocks == 0 || fits)) {
      return;
    }
    for (std::size_t bucket = 0; bucket < policy::kAgeBuckets; ++bucket) {
      profile.blocks[bucket] = gpu_block_ages[bucket].load(std::memory_order_relaxed);
    }
    const auto taken = gpu_block_ages_ms.load(std::memory_order_relaxed);
    profile.age_offset_ms = now_ms > taken ? static_cast<double>(now_ms - taken) : 0.0;
  }
};

// The gateway's own load on the worker. Written by the I/O threads as they
// dispatch requests and read answers; each field is a relaxed atomic count
// of its own (a reader may see one newer than another, never a torn one).
class LoadCounters {
 public:
  [[nodiscard]] std::uint32_t in_flight() const { return in_flight_.load(std::memory_order_relaxed); }
  [[nodiscard]] std::uint64_t pending_prefill_tokens() const {
    return pending_prefill_tokens_.load(std::memory_order_relaxed);
  }
  // Requests dispatched here that have not started answering: those of the
  // engine's waiting requests that are this gateway's own.
  [[nodiscard]] std::uint32_t pending_requests() const { return pending_requests_.load(std::memory_order_relaxed); }
  // Prompt tokens of the requests in flight here (dispatch to finish).
  [[nodiscard]] std::uint64_t active_tokens() const { return active_tokens_.load(std::memory_order_relaxed); }
  // Recent time to first token of the worker's streamed answers, measured by
  // the gateway from dispatch to the first body byte (an exponentially
  // weighted mean; nullopt before the first one). It includes the queueing
  // the engine's own histogram hides from a router that scrapes it.
  [[nodiscard]] std::optional<double> recent_time_to_first_token_seconds() const {
    const double value = recent_ttft_seconds_.load(std::memory_order_relaxed);
    return value < 0 ? std::nullopt : std::optional(value);
  }
  void record_time_to_first_token(double seconds);
  // Uncached prompt tokens per request dispatched here (an exponentially
  // weighted mean, 0 before the first): what each request the engine reports
  // waiting is likely to cost, when other gateways put it there.
  [[nodiscard]] double mean_uncached_tokens() const {
    return std::max(0.0, mean_uncached_tokens_.load(std::memory_order_relaxed));
  }
  void record_dispatch(std::uint64_t uncached_tokens) {
    // Concurrent dispatches may lose one of two updates: an estimate, so
    // no read-modify-write loop on the hot path.
    const double previous = mean_uncached_tokens_.load(std::memory_order_relaxed);
    const auto tokens = static_cast<double>(uncached_tokens);
    mean_uncached_tokens_.store(previous < 0 ? tokens : previous + 0.05 * (tokens - previous),
                                std::memory_order_relaxed);
  }
  // The requests and the priced prefill (ms) the router sent here lately,
  // per ms (policy/congestion.hpp): sums over the dispatches, each weighted
  // by exp(-age / kTrafficWindowMs), over the window. Written at each
  // dispatch by the I/O threads; like the mean above, two concurrent
  // dispatches may lose one update (an estimate, no lock on the hot path).
  static constexpr double kTrafficWindowMs = 5'000;
  void record_traffic(double prefill_ms, std::uint64_t now_ms);
  [[nodiscard]] policy::WorkerTraffic recent_traffic(std::uint64_t now_ms) const;
  void request_started() { in_flight_.fetch_add(1, std::memory_order_relaxed); }
  void request_finished() { in_flight_.fetch_sub(1, std::memory_order_relaxed); }
  void prefill_added(std::uint64_t tokens) {
    pending_prefill_tokens_.fetch_add(tokens, std::memory_order_relaxed);
    pending_requests_.fetch_add(1, std::memory_order_relaxed);
  }
  void prefill_answered(std::uint64_t tokens) {
    pending_prefill_tokens_.fetch_sub(tokens, std::memory_order_relaxed);
    pending_requests_.fetch_sub(1, std::memory_order_relaxed);
  }
  void active_added(std::uint64_t tokens) { active_tokens_.fetch_add(tokens, std::memory_order_relaxed); }
  void active_finished(std::uint64_t tokens) { active_tokens_.fetch_sub(tokens, std::memory_order_relaxed); }

  // What the other kvgate replicas of a cluster (cluster/) last reported
  // having in flight here, summed over the live ones. Written by the
  // cluster's reader thread alone; zero when kvgate runs alone.
  struct PeerCounts {
    std::uint32_t in_flight = 0;
    std::uint64_t pending_prefill_tokens = 0;
    std::uint32_t pending_requests = 0;
    std::uint64_t active_tokens = 0;
    bool operator==(const PeerCounts&) const = default;
  };
  void set_peer_counts(const PeerCounts& counts) {
    peer_in_flight_.store(counts.in_flight, std::memory_order_relaxed);
    peer_pending_prefill_tokens_.store(counts.pending_prefill_tokens, std::memory_order_relaxed);
    peer_pending_requests_.store(counts.pending_requests, std::memory_order_relaxed);
    peer_active_tokens_.store(counts.active_tokens, std::memory_order_relaxed);
  }
  [[nodiscard]] PeerCounts peer_counts() const {
    return {
        peer_in_flight_.load(std::memory_order_relaxed), peer_pending_prefill_tokens_.load(std::memory_order_relaxed),
        peer_pending_requests_.load(std::memory_order_relaxed), peer_active_tokens_.load(std::memory_order_relaxed)};
  }
  // This replica's and its peers' together: what routing prices.
  [[nodiscard]] std::uint32_t fleet_in_flight() const {
    return in_flight() + peer_in_flight_.load(std::memory_order_relaxed);
  }
  [[nodiscard]] std::uint64_t fleet_pending_prefill_tokens() const {
    return pending_prefill_tokens() + peer_pending_prefill_tokens_.load(std::memory_order_relaxed);
  }
  [[nodiscard]] std::uint32_t fleet_pending_requests() const {
    return pending_requests() + peer_pending_requests_.load(std::memory_order_relaxed);
  }
  [[nodiscard]] std::uint64_t fleet_active_tokens() const {
    return active_tokens() + peer_active_tokens_.load(std::memory_order_relaxed);
  }

  // A slot engine's requests from this gateway and their slots.
  [[nodiscard]] SlotOccupancy& slot_occupancy() { return slot_occupancy_; }
  [[nodiscard]] const SlotOccupancy& slot_occupancy() const { return slot_occupancy_; }
  // Its slots kept for conversations' next turns (admission.hold_slots).
  [[nodiscard]] SlotHolds& slot_holds() { return slot_holds_; }
  [[nodiscard]] const SlotHolds& slot_holds() const { return slot_holds_; }

 private:
  SlotOccupancy slot_occupancy_;
  SlotHolds slot_holds_;
  std::atomic<std::uint32_t> peer_in_flight_{0};
  std::atomic<std::uint64_t> peer_pending_prefill_tokens_{0};
  std::atomic<std::uint32_t> peer_pending_requests_{0};
  std::atomic<std::uint64_t> peer_active_tokens_{0};
  std::atomic<std::uint32_t> in_flight_{0};
  std::atomic<std::uint64_t> pending_prefill_tokens_{0};
  std::atomic<double> mean_uncached_tokens_{-1};  // negative: no dispatch yet
  std::atomic<std::uint32_t> pending_requests_{0};
  std::atomic<std::uint64_t> active_tokens_{0};
  std::atomic<double> recent_ttft_seconds_{-1};  // < 0: no sample yet
  // The traffic sums as of traffic_at_ms_ (the newest dispatch's time).
  std::atomic<double> traffic_requests_{0};
  std::atomic<double> traffic_prefill_ms_{0};
  std::atomic<std::uint64_t> traffic_at_ms_{0};
};

// Active health checks. Written by the control thread's checker alone (the
// streaks are its own); the verdict is an atomic the router reads.
class HealthStatus {
 public:
  // Workers start healthy so that traffic flows before the first check ends
  // (the same default as Envoy for hosts without a completed check).
  [[nodiscard]] bool healthy() const { return healthy_.load(std::memory_order_relaxed); }
  HealthChange record_check(bool success, const HealthThresholds& thresholds);

 private:
  std::atomic<bool> healthy_{true};
  std::uint32_t check_failure_streak_ = 0;
  std::uint32_t check_success_streak_ = 0;
};

// The worker's circuit breaker (outlier_ejection.hpp). Written by the I/O
// threads as tries end (under one mutex, taken only when there is a failure
// or a streak to clear); the ejection's end is an atomic the router reads
// lock-free. Times are on the monotonic clock.
class OutlierBreaker {
 public:
  // FailureCause::none for an answer that was not the worker's failure.
  // `may_eject`: the model's cap on ejected workers allows one more.
  CircuitBreaker::Change record_traffic(FailureCause failure, std::uint64_t now_ms, const EjectionOptions& options,
                                        bool may_eject = true);
  // Out of routing until the ejection time ends.
  [[nodiscard]] bool ejected(std::uint64_t now_ms) const {
    const auto until = ejected_until_ms_.load(std::memory_order_relaxed);
    return until != 0 && now_ms < until;
  }
  struct Status {
    BreakerState state = BreakerState::closed;
    std::uint64_t ejected_until_ms = 0;  // monotonic
    std::uint32_t ejections_in_a_row = 0;
    std::uint32_t failure_streak = 0;
    FailureCause last_cause = FailureCause::none;
    std::uint64_t ejections_total = 0;
  };
  [[nodiscard]] Status status(std::uint64_t now_ms) const;

 private:
  mutable std::mutex mutex_;
  CircuitBreaker breaker_;
  std::atomic<bool> clean_{true};  // closed with no failure streak: a success needs no lock
  std::atomic<std::uint64_t> ejected_until_ms_{0};
  std::atomic<std::uint64_t> ejections_total_{0};
};

// What the engine says of itself, from the last good scrape of its
// /metrics. Written by the scraper (control thread): the whole scrape as an
// immutable snapshot, replaced whole, because its fields must agree with
// each other (behind a mutex held for a pointer copy: it is read by the
// admin plane and the index writer's tick, never per request); and the two
// fields the router reads per decision as plain atomics.
class EngineView {
 public:
  struct Scrape {
    EngineLoad load;
    std::uint64_t scraped_ms = 0;  // when it was scraped, on the monotonic clock
  };
  // Null before the first good scrape.
  [[nodiscard]] std::shared_ptr<const Scrape> last() const {
    std::lock_guard lock(last_mutex_);
    return last_;
  }
  // `own_pending`: this gateway's pending requests here while the scrape
  // was under way (the larger of before and after): the engine's waiting
  // requests beyond them are other gateways' and clients'.
  void publish(std::shared_ptr<const Scrape> scrape, std::uint32_t own_pending = 0);
  // What the engine says it is (engine_identity.hpp); null until it said.
  [[nodiscard]] std::shared_ptr<const EngineIdentity> identity() const {
    std::lock_guard lock(last_mutex_);
    return identity_;
  }
  // The LoRA adapters the engine lists on the model (models[].
  // discover_adapters); empty until listed.
  [[nodiscard]] std::vector<std::string> served_adapters() const {
    std::lock_guard lock(last_mutex_);
    return served_adapters_;
  }
  // Returns whether the list changed.
  bool publish_served_adapters(std::vector<std::string> adapters) {
    std::lock_guard lock(last_mutex_);
    if (adapters == served_adapters_) {
      return false;
    }
    served_adapters_ = std::move(adapters);
    return true;
  }
  void publish_identity(std::shared_ptr<const EngineIdentity> identity) {
    std::lock_guard lock(last_mutex_);
    identity_ = std::move(identity);
  }
  // The engine's own ms per computed prompt token (engine_prefill_level.hpp),
  // read per decision; nullopt until its counters showed enough work.
  [[nodiscard]] std::optional<double> prefill_ms_per_token() const {
    const auto level = prefill_ms_per_token_.load(std::memory_order_relaxed);
    return level > 0 ? std::optional(level) : std::nullopt;
  }
  [[nodiscard]] double prefill_level_tokens() const { return prefill_level_tokens_.load(std::memory_order_relaxed); }
  // The engine's KV-cache usage (0..1) at its last scrape, read per
  // decision for the decision log; nullopt: never scraped, or not reported.
  [[nodiscard]] std::optional<double> kv_usage() const {
    const auto usage = kv_usage_.load(std::memory_order_relaxed);
    return usage >= 0 ? std::optional(usage) : std::nullopt;
  }
  // Restarts the scraper saw (an engine counter that went down).
  void restarted() { restarts_.fetch_add(1, std::memory_order_relaxed); }
  [[nodiscard]] std::uint64_t restarts() const { return restarts_.load(std::memory_order_relaxed); }
  // Waiting and time may come from two successive scrapes, which is harmless.
  struct Queue {
    std::optional<std::uint32_t> waiting;  // nullopt: never scraped, or the engine does not report it
    std::uint64_t scraped_ms = 0;          // monotonic
    std::uint32_t others_waiting = 0;      // of `waiting`, beyond this gateway's pending requests at the scrape
  };
  [[nodiscard]] Queue queue() const {
    const auto waiting = waiting_.load(std::memory_order_relaxed);
    return {waiting < 0 ? std::nullopt : std::optional(static_cast<std::uint32_t>(waiting)),
            scraped_ms_.load(std::memory_order_relaxed), others_waiting_.load(std::memory_order_relaxed)};
  }

 private:
  std::atomic<std::int64_t> waiting_{-1};  // < 0: not known
  std::atomic<std::uint32_t> others_waiting_{0};
  std::atomic<std::uint64_t> scraped_ms_{0};
  std::atomic<double> prefill_ms_per_token_{-1};
  std::atomic<double> prefill_level_tokens_{0};
  std::atomic<double> kv_usage_{-1};
  std::atomic<std::uint64_t> restarts_{0};
  EnginePrefillLevel prefill_level_;  // the scraper's alone
  mutable std::mutex last_mutex_;
  std::shared_ptr<const Scrape> last_;
  std::shared_ptr<const EngineIdentity> identity_;
  std::vector<std::string> served_adapters_;  // under last_mutex_
};

// What kvgate learns of the worker from its answers: the prediction drift
// window (prediction_drift.hpp), its own prefill fit (learned_prefill.hpp)
// and its speed against the model's pooled fit (policy::SpeedFit). Written
// by the I/O threads when a response completes and, in a cluster, by its
// reader thread with the peers' cost samples (route/cost_sample.hpp), each
// under its own mutex held for one sample; the router reads the results
// lock-free.
class LearnedCosts {
 public:
  [[nodiscard]] bool drifting() const { return drifting_.load(std::memory_order_relaxed); }
  DriftChange record_prediction(std::uint32_t predicted, std::uint32_t reported, std::uint64_t evicted_tokens,
                                const DriftOptions& options);
  [[nodiscard]] DriftEvidence drift_evidence() const;

  [[nodiscard]] policy::PrefillRates prefill_rates() const { return prefill_.rates(); }
  policy::PrefillFit::Verdict record_prefill(const policy::PrefillSample& sample) { return prefill_.observe(sample); }
  using PrefillFitStatus = LearnedPrefill::Status;
  [[nodiscard]] PrefillFitStatus prefill_fit_status() const { return prefill_.status(); }
  // The priors to start from; called once before traffic (the routing table
  // build, on the control thread), and again only for a worker that has
  // learned nothing yet.
  void set_prefill_prior(const policy::PrefillFitOptions& options) { prefill_.set_prior(options); }
  void record_prefill_speed(double observed_over_predicted);
  [[nodiscard]] double prefill_speed() const { return prefill_speed_.load(std::memory_order_relaxed); }
  [[nodiscard]] double prefill_speed_noise() const { return prefill_speed_noise_.load(std::memory_order_relaxed); }
  [[nodiscard]] policy::SpeedFit prefill_speed_fit() const;

  // Whether the worker keeps a host-RAM prompt cache, as its answers show
  // (engine_identity.hpp's RamCacheEvidence); nullopt: not shown yet. The
  // control thread reads it to re-model the worker.
  std::optional<bool> record_ram_cache(std::uint32_t slot_tokens, std::uint32_t ram_tokens, std::uint32_t reported,
                                       std::uint32_t block_tokens);
  [[nodiscard]] std::optional<bool> ram_cache() const {
    const auto verdict = ram_cache_.load(std::memory_order_relaxed);
    return verdict < 0 ? std::nullopt : std::optional<bool>(verdict > 0);
  }

  // Expected against realized first tokens (ttft_calibration.hpp).
  void record_ttft(double expected_ms, double realized_ms, bool busy) { ttft_.record(expected_ms, realized_ms, busy); }
  [[nodiscard]] TtftCalibrationSummary ttft_calibration() const { return ttft_.summary(); }
  [[nodiscard]] std::uint64_t ttft_recorded() const { return ttft_.recorded(); }
  bool exchange_ttft_flagged(bool flagged) { return ttft_.exchange_flagged(flagged); }
  // The summary's figures the router reads per decision (set by the
  // control thread from the summary it computes each metrics round): the
  // median relative error (0: fewer than kPublishedSamples answers) and
  // the median realized/expected ratio (1 until then).
  static constexpr std::uint32_t kPublishedSamples = TtftCalibration::kMinSamples / 4;
  void publish_ttft_calibration(const TtftCalibrationSummary& summary);
  [[nodiscard]] double ttft_relative_error() const { return ttft_error_.load(std::memory_order_relaxed); }
  [[nodiscard]] double ttft_ratio() const { return ttft_ratio_.load(std::memory_order_relaxed); }

  // What a request ahead of a free slot costs on a slot engine
  // (policy/slot_wait.hpp).
  void record_slot_wait(std::uint32_t ahead, double excess_ms, std::uint32_t slots, double forecast_ms = 0);
  void record_slot_hold(double hold_ms, std::uint32_t slots);
  [[nodiscard]] double ms_per_request_ahead() const { return ms_per_request_ahead_.load(std::memory_order_relaxed); }
  [[nodiscard]] double slot_forecast_scale() const { return slot_forecast_scale_.load(std::memory_order_relaxed); }
  // `fleet_mark`: the model's count of free-slot answers with this one
  // (route::ModelRoute::slot_free_answers).
  void record_slot_free(double realized_over_priors, std::uint64_t fleet_mark);
  // That count at this worker's last free-slot answer.
  [[nodiscard]] std::uint64_t slot_free_mark() const { return slot_free_mark_.load(std::memory_order_relaxed); }
  // SlotWaitFit::free_level; nullopt before it is learned.
  [[nodiscard]] std::optional<double> slot_free_level() const {
    const double level = slot_free_level_.load(std::memory_order_relaxed);
    return level < 0 ? std::nullopt : std::optional(level);
  }
  // The recent slot holds (in no order) into `out`, lock-free; how many. A
  // read during an update may mix the old window with the new.
  std::size_t slot_holds(std::span<double, policy::SlotWaitFit::kWindow> out) const;
  struct SlotWaitStatus {
    double ms_per_request_ahead = 0;
    std::size_t wait_samples = 0;
    std::size_t hold_samples = 0;
    bool from_waits = false;
    double forecast_scale = 1;
    std::size_t forecast_samples = 0;
    std::optional<double> free_level;
    std::size_t free_samples = 0;
  };
  [[nodiscard]] SlotWaitStatus slot_wait_status() const;
  // Of a slot's answer, the share a conversation's next turn reuses there
  // (policy/slot_reuse.hpp).
  void record_answer_reuse(std::uint32_t reused_answer_tokens, std::uint32_t answer_tokens);
  [[nodiscard]] double answer_reuse() const { return answer_reuse_.load(std::memory_order_relaxed); }
  [[nodiscard]] std::size_t answer_reuse_samples() const;

 private:
  TtftCalibration ttft_;
  std::atomic<double> ttft_error_{0};
  std::atomic<double> ttft_ratio_{1};
  mutable std::mutex slot_wait_mutex_;
  policy::SlotWaitFit slot_wait_;
  std::atomic<double> ms_per_request_ahead_{0};
  std::atomic<double> slot_forecast_scale_{1};
  std::atomic<double> slot_free_level_{-1};  // < 0: not learned
  std::atomic<std::uint64_t> slot_free_mark_{0};
  policy::AnswerReuseFit answer_reuse_fit_;  // under slot_wait_mutex_
  std::atomic<double> answer_reuse_{0};
  std::array<std::atomic<double>, policy::SlotWaitFit::kWindow> slot_holds_{};
  std::atomic<std::size_t> slot_hold_count_{0};
  std::atomic<std::int8_t> ram_cache_{-1};
  mutable std::mutex ram_cache_mutex_;
  RamCacheEvidence ram_cache_evidence_;
  std::atomic<bool> drifting_{false};
  mutable std::mutex drift_mutex_;
  PredictionDrift drift_;
  LearnedPrefill prefill_;
  std::atomic<double> prefill_speed_{1};
  std::atomic<double> prefill_speed_noise_{0};
  mutable std::mutex speed_mutex_;
  policy::SpeedFit speed_fit_;
};

class WorkerState {
 public:
  // `model`: the model the worker serves (its request series' label).
  WorkerState(std::string id, std::string url, HttpUrl endpoint, std::string_view model = {})
      : id_(std::move(id)), url_(std::move(url)), endpoint_(std::move(endpoint)), series_(model, id_) {}

  [[nodiscard]] const std::string& id() const { return id_; }
  [[nodiscard]] const std::string& url() const { return url_; }
  [[nodiscard]] const HttpUrl& endpoint() const { return endpoint_; }

  // The parts, by writer (the table at the top of this file).
  LoadCounters& load() { return load_; }
  [[nodiscard]] const LoadCounters& load() const { return load_; }
  HealthStatus& health() { return health_; }
  [[nodiscard]] const HealthStatus& health() const { return health_; }
  OutlierBreaker& breaker() { return breaker_; }
  [[nodiscard]] const OutlierBreaker& breaker() const { return breaker_; }
  EngineView& engine() { return engine_; }
  [[nodiscard]] const EngineView& engine() const { return engine_; }
  // Which of its model's LoRA adapters it holds (adapter_residency.hpp).
  AdapterResidency& adapters() { return adapters_; }
  [[nodiscard]] const AdapterResidency& adapters() const { return adapters_; }
  EventStreamStatus& event_stream() { return event_stream_; }
  [[nodiscard]] const EventStreamStatus& event_stream() const { return event_stream_; }
  LearnedCosts& costs() { return costs_; }
  [[nodiscard]] const LearnedCosts& costs() const { return costs_; }

  // The worker's Prometheus series (obs/worker_series.hpp): they live and
  // leave with the worker. Thread-safe themselves: any writer counts there.
  [[nodiscard]] obs::WorkerSeries& series() const { return series_; }

 private:
  const std::string id_;
  const std::string url_;
  const HttpUrl endpoint_;
  mutable obs::WorkerSeries series_;
  LoadCounters load_;
  HealthStatus health_;
  OutlierBreaker breaker_;
  EngineView engine_;
  AdapterResidency adapters_;
  EventStreamStatus event_stream_;
  LearnedCosts costs_;
};

// Counts one request in the worker's in-flight total from construction
// until finish() or destruction, whichever comes first (exactly once), and
// its uncached prompt tokens as pending prefill until the worker starts
// answering or the request ends. Engines send a stream's header at once
// (vLLM's StreamingResponse) and its first event after the first token, so
// a stream answers at its first body byte, any other response at its header.
class InFlightRequest {
 public:
  // `prompt_tokens`: the whole prompt, counted as the worker's active load
  // until the request finishes. On a slot engine (`slots` > 0) the request
  // also takes its place in the worker's SlotOccupancy, dispatched at
  // `now_ms` (the gateway's monotonic clock, as the times given to
  // first_token and finish).
  explicit InFlightRequest(WorkerState& worker, std::uint64_t prefill_tokens = 0, std::uint64_t prompt_tokens = 0,
                           std::uint32_t slots = 0, std::uint64_t now_ms = 0)
      : worker_(&worker.load()), prefill_tokens_(prefill_tokens), prompt_tokens_(prompt_tokens) {
    worker_->request_started();
    worker_->record_dispatch(prefill_tokens);
    worker_->prefill_added(prefill_tokens);
    worker_->active_added(prompt_tokens);
    if (slots > 0) {
      occupancy_entry_ = worker_->slot_occupancy().admit(now_ms, slots);
      dispatched_ms_ = now_ms;
    }
  }
  InFlightRequest(const InFlightRequest&) = delete;
  InFlightRequest& operator=(const InFlightRequest&) = delete;
  InFlightRequest(InFlightRequest&& other) noexcept
      : worker_(std::exchange(other.worker_, nullptr)),
        prefill_tokens_(std::exchange(other.prefill_tokens_, 0)),
        prompt_tokens_(std::exchange(other.prompt_tokens_, 0)),
        occupancy_entry_(std::exchange(other.occupancy_entry_, SlotOccupancy::kUntracked)),
        dispatched_ms_(other.dispatched_ms_),
        pending_(std::exchange(other.pending_, false)) {}
  InFlightRequest& operator=(InFlightRequest&&) = delete;
  // Without a time: when the owner ends without one (an abandoned attempt).
  ~InFlightRequest() { static_cast<void>(finish(dispatched_ms_)); }

  void answering() {
    if (worker_ != nullptr && pending_) {
      worker_->prefill_answered(prefill_tokens_);
      prefill_tokens_ = 0;
      pending_ = false;
    }
  }
  // The first token of a streamed answer arrived: the prefill is over.
  void first_token(double seconds_since_dispatch) {
    if (worker_ != nullptr) {
      answering();
      worker_->record_time_to_first_token(seconds_since_dispatch);
      worker_->slot_occupancy().started(
          occupancy_entry_, dispatched_ms_ + static_cast<std::uint64_t>(std::max(0.0, seconds_since_dispatch) * 1e3));
    }
  }

  // `now_ms`: when the worker was done with it (its slot freed then). On a
  // slot engine, how long the request waited for and held its slot (none
  // when untracked, never given one, or already finished).
  SlotOccupancy::Times finish(std::uint64_t now_ms) {
    if (worker_ == nullptr) {
      return {};
    }
    answering();
    worker_->active_finished(prompt_tokens_);
    worker_->request_finished();
    auto times = worker_->slot_occupancy().release(std::exchange(occupancy_entry_, SlotOccupancy::kUntracked),
                                                   std::max(now_ms, dispatched_ms_));
    worker_ = nullptr;
    return times;
  }

 private:
  LoadCounters* worker_;
  std::uint64_t prefill_tokens_;
  std::uint64_t prompt_tokens_;
  std::size_t occupancy_entry_ = SlotOccupancy::kUntracked;
  std::uint64_t dispatched_ms_ = 0;
  bool pending_ = true;  // counted in the worker's pending requests until answering
};

}  // namespace kvgate::workers
