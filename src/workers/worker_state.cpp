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

// Each sample weighs a fifth: about the last ten answers matter, so a worker
// whose queue grows shows it within a few requests.
void WorkerState::record_time_to_first_token(double seconds) {
  constexpr double kWeight = 0.2;
  double current = recent_ttft_seconds_.load(std::memory_order_relaxed);
  double next = 0;
  do {
    next = current < 0 ? seconds : current + kWeight * (seconds - current);
  } while (!recent_ttft_seconds_.compare_exchange_weak(current, next, std::memory_order_relaxed));
}

DriftChange WorkerState::record_prediction(std::uint32_t predicted, std::uint32_t reported,
                                           const DriftOptions& options) {
  std::lock_guard lock(drift_mutex_);
  auto change = drift_.record(predicted, reported, options);
  drifting_.store(drift_.drifting(), std::memory_order_relaxed);
  return change;
}

DriftEvidence WorkerState::drift_evidence() const {
  std::lock_guard lock(drift_mutex_);
  return drift_.evidence();
}

}  // namespace kvgate::workers
