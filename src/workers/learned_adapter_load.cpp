#include "kvgate/workers/learned_adapter_load.hpp"

#include <algorithm>

namespace kvgate::workers {

void LearnedAdapterLoad::observe(bool loaded, double excess_ms) {
  std::lock_guard lock(mutex_);
  auto& mean = loaded ? loaded_mean_ : unloaded_mean_;
  auto& samples = loaded ? loaded_samples_ : unloaded_samples_;
  // The first samples are averaged plainly, then weighted: a mean from the
  // first sample alone would carry that sample's noise for a long time.
  ++samples;
  const double weight = std::max(kWeight, 1.0 / static_cast<double>(samples));
  mean += weight * (excess_ms - mean);
  if (loaded_samples_ >= kMinSamples && unloaded_samples_ >= kMinSamples) {
    learned_ms_.store(std::clamp(loaded_mean_ - unloaded_mean_, 0.0, kMaxLoadMs), std::memory_order_relaxed);
  }
}

LearnedAdapterLoad::Status LearnedAdapterLoad::status() const {
  std::lock_guard lock(mutex_);
  return {loaded_samples_, unloaded_samples_, learned_ms_.load(std::memory_order_relaxed)};
}

}  // namespace kvgate::workers
