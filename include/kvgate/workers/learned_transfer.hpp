#pragma once
// What moving a prompt's KV from a prefill worker to a decoder costs, per
// token, as a disaggregated model's requests show it: from the prefill
// worker's answer to the decoder's first token, over the tokens the decoder
// lacked. That span also holds the decoder's admission and first step, so
// the figure prices the whole hand-over, not the wire alone; the
// configured link (disaggregation.transfer_gbps) is the prior until
// kMinSamples. Exponentially weighted.
//
// Fed by any I/O thread when a remotely prefilled stream's first token
// arrives (the mutex guards the mean for one update); read lock-free.
#include <atomic>
#include <cstdint>
#include <mutex>

namespace kvgate::workers {

class LearnedTransfer {
 public:
  static constexpr std::uint32_t kMinSamples = 8;
  static constexpr double kWeight = 0.1;  // of a new sample in the mean
  // Fewer moved tokens than this say more about the decoder's first step
  // than about the link: not learned from.
  static constexpr std::uint32_t kMinTokens = 256;

  void observe(std::uint32_t moved_tokens, double handover_ms) {
    if (moved_tokens < kMinTokens || !(handover_ms >= 0)) {
      return;
    }
    const double sample = handover_ms / static_cast<double>(moved_tokens);
    std::lock_guard lock(mutex_);
    mean_ = samples_ == 0 ? sample : mean_ + kWeight * (sample - mean_);
    ++samples_;
    samples_seen_.store(samples_, std::memory_order_relaxed);
    if (samples_ >= kMinSamples) {
      learned_.store(mean_, std::memory_order_relaxed);
    }
  }
  // ms per moved token: the learned figure, else `prior`.
  [[nodiscard]] double ms_per_token(double prior) const {
    const double learned = learned_.load(std::memory_order_relaxed);
    return learned >= 0 ? learned : prior;
  }
  [[nodiscard]] bool learned() const { return learned_.load(std::memory_order_relaxed) >= 0; }
  [[nodiscard]] std::uint64_t samples() const { return samples_seen_.load(std::memory_order_relaxed); }

 private:
  std::mutex mutex_;
  double mean_ = 0;  // under mutex_
  std::uint64_t samples_ = 0;
  std::atomic<std::uint64_t> samples_seen_{0};
  std::atomic<double> learned_{-1};
};

}  // namespace kvgate::workers
