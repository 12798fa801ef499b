#include "kvgate/workers/worker_state.hpp"

namespace kvgate::workers {

HealthChange WorkerState::record_check(bool success, const HealthThresholds& thresholds) {
  if (success) {
    check_failure_streak_ = 0;
    ++check_success_streak_;
    if (!healthy() && check_success_streak_ >= thresholds.healthy_after) {
      passive_failure_streak_.store(0, std::memory_order_relaxed);
      healthy_.store(true, std::memory_order_relaxed);
      return HealthChange::went_up;
    }
    return HealthChange::none;
  }
  check_success_streak_ = 0;
  ++check_failure_streak_;
  if (check_failure_streak_ >= thresholds.unhealthy_after && healthy_.exchange(false, std::memory_order_relaxed)) {
    return HealthChange::went_down;
  }
  return HealthChange::none;
}

HealthChange WorkerState::record_traffic(bool failure, const HealthThresholds& thresholds) {
  if (!failure) {
    passive_failure_streak_.store(0, std::memory_order_relaxed);
    return HealthChange::none;
  }
  auto streak = passive_failure_streak_.fetch_add(1, std::memory_order_relaxed) + 1;
  if (thresholds.passive_failures != 0 && streak >= thresholds.passive_failures &&
      healthy_.exchange(false, std::memory_order_relaxed)) {
    return HealthChange::went_down;
  }
  return HealthChange::none;
}

}  // namespace kvgate::workers
