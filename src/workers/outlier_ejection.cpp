#include "kvgate/workers/outlier_ejection.hpp"

#include <algorithm>

namespace kvgate::workers {

CircuitBreaker::Change CircuitBreaker::record(FailureCause failure, std::uint64_t now_ms,
                                              const EjectionOptions& options, bool may_eject) {
  const auto current = state(now_ms);
  if (current == BreakerState::open) {
    // Answers to requests dispatched before the ejection say nothing new.
    return Change::none;
  }
  if (failure == FailureCause::none) {
    streak_ = 0;
    if (current == BreakerState::half_open) {
      open_until_ms_ = 0;
      ejections_ = 0;
      return Change::restored;
    }
    return Change::none;
  }
  last_cause_ = failure;
  ++streak_;
  if (options.consecutive_failures == 0 || !may_eject) {
    return Change::none;
  }
  // Half-open: the probe failed, back out at once for twice as long.
  if (current == BreakerState::half_open || streak_ >= options.consecutive_failures) {
    open(now_ms, options);
    return Change::ejected;
  }
  return Change::none;
}

BreakerState CircuitBreaker::state(std::uint64_t now_ms) const {
  if (open_until_ms_ == 0) {
    return BreakerState::closed;
  }
  return now_ms < open_until_ms_ ? BreakerState::open : BreakerState::half_open;
}

void CircuitBreaker::open(std::uint64_t now_ms, const EjectionOptions& options) {
  ++ejections_;
  std::uint64_t duration = options.base_ejection_ms;
  for (std::uint32_t doubling = 1; doubling < ejections_ && duration < options.max_ejection_ms; ++doubling) {
    duration *= 2;
  }
  open_until_ms_ = now_ms + std::min(std::max<std::uint64_t>(duration, 1), options.max_ejection_ms);
  streak_ = 0;
}

}  // namespace kvgate::workers
