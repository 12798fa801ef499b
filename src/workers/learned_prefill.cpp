#include "kvgate/workers/learned_prefill.hpp"

namespace kvgate::workers {

policy::PrefillRates LearnedPrefill::rates() const {
  return {ms_per_token_.load(std::memory_order_relaxed),
          ms_per_token_pair_.load(std::memory_order_relaxed),
          base_ms_.load(std::memory_order_relaxed),
          samples_.load(std::memory_order_relaxed),
          ms_per_active_token_.load(std::memory_order_relaxed),
          ms_per_queued_token_.load(std::memory_order_relaxed),
          relative_noise_.load(std::memory_order_relaxed)};
}

policy::PrefillFit::Verdict LearnedPrefill::observe(const policy::PrefillSample& sample) {
  std::lock_guard lock(mutex_);
  const auto verdict = fit_.observe(sample);
  if (verdict != policy::PrefillFit::Verdict::rejected) {
    publish(fit_.rates());
  }
  return verdict;
}

LearnedPrefill::Status LearnedPrefill::status() const {
  std::lock_guard lock(mutex_);
  return {fit_.rates(), fit_.clipped(), fit_.residual_scale()};
}

void LearnedPrefill::set_prior(const policy::PrefillFitOptions& options) {
  std::lock_guard lock(mutex_);
  if (fit_.rates().samples != 0) {
    return;
  }
  fit_ = policy::PrefillFit(options);
  publish(fit_.rates());
}

void LearnedPrefill::publish(const policy::PrefillRates& rates) {
  ms_per_token_.store(rates.ms_per_token, std::memory_order_relaxed);
  ms_per_token_pair_.store(rates.ms_per_token_pair, std::memory_order_relaxed);
  base_ms_.store(rates.base_ms, std::memory_order_relaxed);
  ms_per_active_token_.store(rates.ms_per_active_token, std::memory_order_relaxed);
  ms_per_queued_token_.store(rates.ms_per_queued_token, std::memory_order_relaxed);
  relative_noise_.store(rates.relative_noise, std::memory_order_relaxed);
  samples_.store(rates.samples, std::memory_order_relaxed);
}

}  // namespace kvgate::workers
