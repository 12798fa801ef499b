#pragma once
// Whether the gateway's model of one worker's prefix cache still agrees
// with what the engine reports. Pure: samples in, verdicts out; no clock,
// no lock (WorkerState wraps it for the I/O threads).
//
// A sample is one routed request whose engine reported its cached tokens:
// the tokens the index predicted there (before any drift discount) and the
// engine's usage.prompt_tokens_details.cached_tokens. Samples where neither
// side claims a hit say nothing and are skipped, and so are over-predictions
// the engine's own events explain: it reported evicting at least as many
// tokens' blocks from that worker between the decision and the answer,
// beyond the room the request's own new blocks needed, as the prediction
// missed (other traffic, from this gateway or another, took
// the blocks first; under KV pressure with several gateways that is common,
// and says nothing about the index). Lost events, an unannounced restart or
// a foreign tokenizer leave misses no eviction explains. The worker is drifting
// when, over the last `window` informative samples (at least
// `min_samples`), the share that over-predicted reaches `trip_share`; it
// recovers when the share falls to `recover_share` (hysteresis, so a worker
// near the line does not flap). Over-prediction is what misleads routing
// (a hit promised and not delivered); under-prediction only loses a chance.
// Causes seen in practice: a configured KV capacity far above the engine's,
// a block size that differs from the engine's, lost events, an engine that
// restarted or reset its cache without telling, a tokenizer or chat
// template that is not the engine's.
#include <cstdint>
#include <vector>

#include "kvgate/config/options.hpp"

namespace kvgate::workers {

using config::DriftOptions;  // window, min_samples, trip_share, recover_share

// The evidence behind a verdict (logged once per change, shown in /debug).
struct DriftEvidence {
  std::uint32_t samples = 0;         // informative samples in the window
  std::uint32_t over_predicted = 0;  // of them, predicted > reported
  std::uint64_t predicted_tokens = 0;
  std::uint64_t reported_tokens = 0;
};

enum class DriftChange { none, started, ended };

class PredictionDrift {
 public:
  // evicted_tokens: tokens in the GPU blocks the engine reported evicting
  // on this worker since the decision, less the request's own uncached
  // prompt and answer tokens (0 for a worker without events).
  DriftChange record(std::uint32_t predicted, std::uint32_t reported, std::uint64_t evicted_tokens,
                     const DriftOptions& options);
  [[nodiscard]] bool drifting() const { return drifting_; }
  [[nodiscard]] DriftEvidence evidence() const;

 private:
  struct Sample {
    std::uint32_t predicted;
    std::uint32_t reported;
  };
  std::vector<Sample> ring_;  // at most options.window; oldest at next_ once full
  std::size_t next_ = 0;
  bool drifting_ = false;
};

}  // namespace kvgate::workers
