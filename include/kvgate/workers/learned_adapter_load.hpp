#pragma once
// What loading a LoRA adapter costs a model's workers, learned from the
// requests' own first tokens: the cost model prices a request whose adapter
// the worker must load with one load time (models[].lora_load, the prior),
// so a loaded request's TTFT beyond its expectation without the load, less
// the same excess for requests that loaded nothing (the cost model's own
// error), is the load. Means are exponentially weighted; the prior stands
// until both kinds have kMinSamples.
//
// Fed by any I/O thread when a streamed request ends cleanly (the mutex
// guards the means for one update); read lock-free by the router.
#include <atomic>
#include <cstdint>
#include <mutex>

namespace kvgate::workers {

class LearnedAdapterLoad {
 public:
  static constexpr std::uint32_t kMinSamples = 8;
  static constexpr double kWeight = 0.05;  // of a new sample in the means
  static constexpr double kMaxLoadMs = 60'000;

  // `excess_ms`: the first token's time less the cost model's expected
  // time without any adapter load. `loaded`: the decision priced a load.
  void observe(bool loaded, double excess_ms);
  // The learned load time, or `prior_ms` until there is one.
  [[nodiscard]] double load_ms(double prior_ms) const {
    const double learned = learned_ms_.load(std::memory_order_relaxed);
    return learned >= 0 ? learned : prior_ms;
  }
  struct Status {
    std::uint64_t loaded_samples = 0;
    std::uint64_t unloaded_samples = 0;
    double learned_ms = -1;  // < 0: not yet
  };
  [[nodiscard]] Status status() const;

 private:
  mutable std::mutex mutex_;
  double loaded_mean_ = 0;  // under mutex_
  double unloaded_mean_ = 0;
  std::uint64_t loaded_samples_ = 0;
  std::uint64_t unloaded_samples_ = 0;
  std::atomic<double> learned_ms_{-1};
};

}  // namespace kvgate::workers
