#pragma once
// A prefill fit shared between threads (policy/prefill_fit.hpp): fed by any
// I/O thread when a streamed request ends cleanly, read lock-free by the
// router as atomics (doubles that may come from two successive updates,
// which is harmless). The mutex guards only the fit, held for one update.
// One per worker (its own fit) and one per model (the fleet's pooled fit,
// route/README.md), which is why it is a room of its own.
#include <atomic>
#include <cstdint>
#include <mutex>

#include "kvgate/policy/prefill_fit.hpp"

namespace kvgate::workers {

class LearnedPrefill {
 public:
  [[nodiscard]] policy::PrefillRates rates() const;
  policy::PrefillFit::Verdict observe(const policy::PrefillSample& sample);
  struct Status {
    policy::PrefillRates rates;
    std::uint64_t clipped = 0;
    double residual_scale = 0;  // relative to the priors' prediction
  };
  [[nodiscard]] Status status() const;
  // The priors to start from; ignored once anything is learned (what was
  // learned outlives a reload).
  void set_prior(const policy::PrefillFitOptions& options);

 private:
  void publish(const policy::PrefillRates& rates);  // under mutex_

  std::atomic<double> ms_per_token_{policy::PrefillRates{}.ms_per_token};
  std::atomic<double> ms_per_token_pair_{policy::PrefillRates{}.ms_per_token_pair};
  std::atomic<double> base_ms_{policy::PrefillRates{}.base_ms};
  std::atomic<double> ms_per_active_token_{policy::PrefillRates{}.ms_per_active_token};
  std::atomic<double> ms_per_queued_token_{policy::PrefillRates{}.ms_per_queued_token};
  std::atomic<double> relative_noise_{0};
  std::atomic<std::uint64_t> samples_{0};
  mutable std::mutex mutex_;
  policy::PrefillFit fit_{policy::PrefillFitOptions{}};
};

}  // namespace kvgate::workers
