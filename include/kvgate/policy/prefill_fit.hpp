#pragma once
// Learns a worker's PrefillRates from its completed requests: each gives the
// prompt length, the engine-reported cached tokens, the prompt tokens kvgate
// had queued on the worker at dispatch and the time to first token. Pure and
// deterministic (the caller serialises updates).
//
// The fit is exponentially weighted ridge regression towards the priors:
//   ttft_ms ~ a * new + b * (L^2 - cached^2) / 2 + c + d * active + q * queued
// (active: the context tokens of the requests decoding there, which every
// scheduler step reads: continuous batching slows a prefill by them;
// queued: the uncached prompt tokens dispatched there before this one and
// not yet answered). The queue has its own coefficient, not a: a prompt
// counted as queued may already be half computed, so with one shared
// coefficient the busiest worker would learn the lowest per-token cost,
// look the cheapest and draw still more (measured: trace.sh weka70).
// minimising sum_k lambda^(n-k) (relative residual_k)^2 / noise^2
//           + (theta - prior)' Lambda (theta - prior)
// with its 3x3 normal equations solved after every sample.
// - The priors' precision Lambda is never forgotten: a direction the
//   samples do not excite (every prompt the same length cannot separate
//   the three terms) stays at the priors instead of drifting, which plain
//   recursive least squares with forgetting does (covariance wind-up).
//   It is weak (one standard deviation is 10x a prior), so a few dozen
//   varied samples override it.
// - Forgetting (0.99 per sample by default, a memory of ~100 requests)
//   follows a worker whose speed changes (another model loaded, a GPU
//   throttling, a new engine version).
// - Samples are weighted by the inverse of what the priors predict for them
//   (relative errors: TTFT noise grows with TTFT).
// - Residuals are clipped at 3 robust scales (an EWMA of the absolute
//   relative residual) after a warm-up: a preempted request or one stalled
//   behind a long decode batch moves the fit by a bounded step, not to its
//   value.
// - The coefficients stay non-negative, and `a` above 1% of its prior (a
//   cost that learned to be free would draw all traffic): a coefficient
//   that would cross its floor is held there and the others re-solved.
// Features are scaled (thousands of tokens, millions of token pairs) so
// the three coefficients are of comparable size.
#include <array>
#include <cstddef>
#include <cstdint>

#include "kvgate/policy/prefill_rates.hpp"

namespace kvgate::policy {

struct PrefillSample {
  std::uint32_t input_tokens = 0;
  std::uint32_t cached_tokens = 0;  // engine-reported
  std::uint64_t queued_tokens = 0;  // uncached prompt tokens dispatched there before this one, not yet answered
  std::uint64_t active_tokens = 0;  // prompt tokens of the requests in flight there at dispatch (decoding)
  double ttft_ms = 0;               // dispatch to the first token
};

// What rates predict for a sample: its queue and its own prefill.
[[nodiscard]] inline double predicted_ttft_ms(const PrefillRates& rates, const PrefillSample& sample) {
  return rates.queue_ms(sample.queued_tokens, sample.active_tokens) +
         rates.prefill_ms(sample.input_tokens, sample.cached_tokens);
}

// A worker's speed against its model's pooled fit: the exponentially
// weighted mean of log(observed TTFT / the pooled prediction), each sample
// clipped at a factor of 8 either way, pulled towards 1 (the fleet's own
// speed) by kPriorWeight pseudo-samples so that a few noisy requests do not
// make a replica look twice as fast. The pooled fit learns the shape of the
// cost from every worker's requests (well conditioned: four times the
// samples, all the fleet's prompt lengths); each worker learns one number.
// Pure; the caller serialises updates.
class SpeedFit {
 public:
  static constexpr double kForgetting = 0.98;  // a memory of ~50 requests
  static constexpr double kPriorWeight = 4;
  static constexpr double kMaxLogRatio = 2.0794415416798357;  // log(8)

  void observe(double observed_over_predicted);
  [[nodiscard]] double speed() const;
  // How far speed() may be off, relative: the standard error of the
  // weighted mean log ratio (what two workers' speeds must differ by to be
  // told apart; 0 before any sample).
  [[nodiscard]] double relative_noise() const;
  [[nodiscard]] std::uint64_t samples() const { return samples_; }

 private:
  double weighted_squares_ = 0;  // forgotten sum of squared log ratios
  double weighted_sum_ = 0;      // forgotten sum of log ratios
  double weight_ = 0;            // forgotten count
  std::uint64_t samples_ = 0;
};

struct PrefillFitOptions {
  PrefillRates prior;
  double forgetting = 0.99;
  double clip_scales = 3;
  std::uint32_t warmup_samples = 8;  // no clipping before this many (the residual scale is still unknown)
};

class PrefillFit {
 public:
  enum class Verdict : std::uint8_t { used, clipped, rejected };

  explicit PrefillFit(const PrefillFitOptions& options);

  Verdict observe(const PrefillSample& sample);
  [[nodiscard]] PrefillRates rates() const;
  [[nodiscard]] std::uint64_t clipped() const { return clipped_; }
  // The typical residual, as a fraction of the priors' prediction.
  [[nodiscard]] double residual_scale() const { return scale_; }

 private:
  static constexpr std::size_t kTerms = 5;
  using Vector = std::array<double, kTerms>;
  using Matrix = std::array<Vector, kTerms>;

  PrefillFitOptions options_;
  void solve();

  Vector prior_{};      // ms per 1k tokens, per 1M token pairs, ms, per 100k active tokens, per 1k queued tokens
  Vector precision_{};  // of the priors (diagonal)
  Vector floor_{};      // the coefficients' lower bounds
  Matrix gram_{};       // forgotten sum of x x' / noise^2
  Vector moment_{};     // forgotten sum of x y / noise^2
  Vector theta_{};      // the current solution
  double scale_ = 0;
  std::uint64_t samples_ = 0;
  std::uint64_t clipped_ = 0;
};

}  // namespace kvgate::policy
