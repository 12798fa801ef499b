#pragma once
// What one answer teaches of its worker's costs: the decision's
// expectation beside what the worker did. The router makes one from each
// clean first attempt it completes and learns from it (learn_costs); a
// cluster's replicas send theirs to one another (PeerPublisher::learned),
// so every replica learns a worker's costs from every replica's answers,
// not from its share of them.
//
// Learned from a sample, per worker (workers::LearnedCosts): the TTFT
// calibration, a slot engine's wait per request ahead and slot hold,
// whether llama-server keeps a host-RAM prompt cache, the prefill fit and
// the speed against the model's pooled fit. Not from a peer's sample: the
// prediction drift (it judges this replica's own index) and the metrics of
// this replica's own requests.
#include <cstddef>
#include <cstdint>
#include <optional>

namespace kvgate::config {
struct CacheAwareOptions;
}

namespace kvgate::route {

struct ModelRoute;

struct CostSample {
  // The decision, on the replica that made it.
  double expected_ttft_ms = -1;  // < 0: the policy priced none
  double queue_delay_ms = 0;     // the part of expected_ttft_ms that was queue
  double slot_forecast_ms = 0;   // of it, a slot forecast before its correction (0: none)
  bool worker_busy = false;
  std::uint32_t slots = 0;           // a slot engine's slots (0: none modelled)
  std::uint32_t requests_ahead = 0;  // requests ahead of a free slot
  std::uint64_t queued_tokens = 0;   // uncached prompt tokens dispatched there before, not yet answered
  std::uint64_t active_tokens = 0;   // prompt tokens in flight there
  std::uint32_t indexed_cached_tokens = 0;
  std::uint32_t offloaded_cached_tokens = 0;  // of those, in the worker's host RAM
  // The answer.
  std::optional<double> ttft_ms;    // the first streamed token (nullopt: not streamed)
  std::optional<double> decode_ms;  // the first token to the answer's end
  std::optional<std::uint32_t> prompt_tokens;
  std::optional<std::uint32_t> cached_tokens;
  // A slot engine: dispatch, or the release that freed its slot, to the
  // answer's end (workers::SlotOccupancy; nullopt: not tracked).
  std::optional<double> slot_hold_ms;
  // ... and the dispatch to that start: its wait for a slot (0: a slot was
  // free; nullopt: not measured).
  std::optional<double> slot_wait_ms;
  bool operator==(const CostSample&) const = default;
};

// Teaches `model.workers[worker]` and the model's pooled prefill fit what
// the sample shows, against `options` (routing.cache_aware: its priors and
// learn_prefill_cost).
// Thread-safe (each learner takes its own lock for one sample); logs a
// worker's host-RAM cache the first time its answers show it.
void learn_costs(const ModelRoute& model, std::size_t worker, const CostSample& sample,
                 const config::CacheAwareOptions& options);

}  // namespace kvgate::route
