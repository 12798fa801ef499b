#include "kvgate/workers/worker_state.hpp"

#include <algorithm>
#include <cmath>

namespace kvgate::workers {

HealthChange HealthStatus::record_check(bool success, const HealthThresholds& thresholds) {
  if (success) {
    check_failure_streak_ = 0;
    ++check_success_streak_;
    if (!healthy() && check_success_streak_ >= thresholds.healthy_after) {
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

CircuitBreaker::Change OutlierBreaker::record_traffic(FailureCause failure, std::uint64_t now_ms,
                                                      const EjectionOptions& options, bool may_eject) {
  if (failure == FailureCause::none && clean_.load(std::memory_order_relaxed)) {
    return CircuitBreaker::Change::none;
  }
  std::lock_guard lock(mutex_);
  const auto change = breaker_.record(failure, now_ms, options, may_eject);
  ejected_until_ms_.store(breaker_.open_until_ms(), std::memory_order_relaxed);
  clean_.store(breaker_.open_until_ms() == 0 && breaker_.failure_streak() == 0, std::memory_order_relaxed);
  if (change == CircuitBreaker::Change::ejected) {
    ejections_total_.fetch_add(1, std::memory_order_relaxed);
  }
  return change;
}

OutlierBreaker::Status OutlierBreaker::status(std::uint64_t now_ms) const {
  std::lock_guard lock(mutex_);
  return {breaker_.state(now_ms),    breaker_.open_until_ms(), breaker_.ejections_in_a_row(),
          breaker_.failure_streak(), breaker_.last_cause(),    ejections_total_.load(std::memory_order_relaxed)};
}

// Each sample weighs a fifth: about the last ten answers matter, so a worker
// whose queue grows shows it within a few requests.
void LoadCounters::record_time_to_first_token(double seconds) {
  constexpr double kWeight = 0.2;
  double current = recent_ttft_seconds_.load(std::memory_order_relaxed);
  double next = 0;
  do {
    next = current < 0 ? seconds : current + kWeight * (seconds - current);
  } while (!recent_ttft_seconds_.compare_exchange_weak(current, next, std::memory_order_relaxed));
}

namespace {
// What sums taken at `then` are worth at `now` (a clock that went back, or
// a dispatch seen late by another thread, decays nothing).
double traffic_decay(std::uint64_t then_ms, std::uint64_t now_ms) {
  return now_ms > then_ms ? std::exp(-static_cast<double>(now_ms - then_ms) / LoadCounters::kTrafficWindowMs) : 1.0;
}
}  // namespace

void LoadCounters::record_traffic(double prefill_ms, std::uint64_t now_ms) {
  const auto then = traffic_at_ms_.load(std::memory_order_relaxed);
  const double decay = traffic_decay(then, now_ms);
  const double work = std::isfinite(prefill_ms) ? std::max(prefill_ms, 0.0) : 0.0;
  traffic_requests_.store(traffic_requests_.load(std::memory_order_relaxed) * decay + 1, std::memory_order_relaxed);
  traffic_prefill_ms_.store(traffic_prefill_ms_.load(std::memory_order_relaxed) * decay + work,
                            std::memory_order_relaxed);
  traffic_at_ms_.store(std::max(then, now_ms), std::memory_order_relaxed);
}

policy::WorkerTraffic LoadCounters::recent_traffic(std::uint64_t now_ms) const {
  const double decay = traffic_decay(traffic_at_ms_.load(std::memory_order_relaxed), now_ms);
  return {traffic_requests_.load(std::memory_order_relaxed) * decay / kTrafficWindowMs,
          traffic_prefill_ms_.load(std::memory_order_relaxed) * decay / kTrafficWindowMs};
}

DriftChange LearnedCosts::record_prediction(std::uint32_t predicted, std::uint32_t reported,
                                            std::uint64_t evicted_tokens, const DriftOptions& options) {
  std::lock_guard lock(drift_mutex_);
  auto change = drift_.record(predicted, reported, evicted_tokens, options);
  drifting_.store(drift_.drifting(), std::memory_order_relaxed);
  return change;
}

DriftEvidence LearnedCosts::drift_evidence() const {
  std::lock_guard lock(drift_mutex_);
  return drift_.evidence();
}

void EngineView::publish(std::shared_ptr<const Scrape> scrape, std::uint32_t own_pending) {
  if (scrape) {
    const auto waiting =
        scrape->load.waiting ? static_cast<std::int64_t>(std::max(0.0, std::floor(*scrape->load.waiting))) : -1;
    waiting_.store(waiting, std::memory_order_relaxed);
    others_waiting_.store(static_cast<std::uint32_t>(std::max<std::int64_t>(0, waiting - own_pending)),
                          std::memory_order_relaxed);
    scraped_ms_.store(scrape->scraped_ms, std::memory_order_relaxed);
    kv_usage_.store(scrape->load.kv_usage.value_or(-1), std::memory_order_relaxed);
    if (scrape->load.prefill_seconds && scrape->load.computed_prompt_tokens) {
      prefill_level_.observe(*scrape->load.prefill_seconds, *scrape->load.computed_prompt_tokens);
      prefill_ms_per_token_.store(prefill_level_.ms_per_token().value_or(-1), std::memory_order_relaxed);
      prefill_level_tokens_.store(prefill_level_.tokens(), std::memory_order_relaxed);
    }
  } else {
    waiting_.store(-1, std::memory_order_relaxed);
    others_waiting_.store(0, std::memory_order_relaxed);
    kv_usage_.store(-1, std::memory_order_relaxed);
  }
  std::lock_guard lock(last_mutex_);
  last_ = std::move(scrape);
}

void LearnedCosts::record_prefill_speed(double observed_over_predicted) {
  std::lock_guard lock(speed_mutex_);
  speed_fit_.observe(observed_over_predicted);
  prefill_speed_.store(speed_fit_.speed(), std::memory_order_relaxed);
  prefill_speed_noise_.store(speed_fit_.relative_noise(), std::memory_order_relaxed);
}

std::optional<bool> LearnedCosts::record_ram_cache(std::uint32_t slot_tokens, std::uint32_t ram_tokens,
                                                   std::uint32_t reported, std::uint32_t block_tokens) {
  std::lock_guard lock(ram_cache_mutex_);
  auto changed = ram_cache_evidence_.record(slot_tokens, ram_tokens, reported, block_tokens);
  if (changed) {
    ram_cache_.store(*changed ? 1 : 0, std::memory_order_relaxed);
  }
  return changed;
}

void LearnedCosts::publish_ttft_calibration(const TtftCalibrationSummary& summary) {
  const bool enough = summary.samples >= kPublishedSamples;
  ttft_error_.store(enough ? summary.relative_error_p50 : 0.0, std::memory_order_relaxed);
  ttft_ratio_.store(enough && summary.ratio_p50 > 0 ? summary.ratio_p50 : 1.0, std::memory_order_relaxed);
}

void LearnedCosts::record_slot_wait(std::uint32_t ahead, double excess_ms, std::uint32_t slots, double forecast_ms) {
  std::lock_guard lock(slot_wait_mutex_);
  slot_wait_.observe_wait(ahead, excess_ms, forecast_ms);
  ms_per_request_ahead_.store(slot_wait_.ms_per_request_ahead(slots), std::memory_order_relaxed);
  slot_forecast_scale_.store(slot_wait_.forecast_scale(), std::memory_order_relaxed);
}

void LearnedCosts::record_slot_hold(double hold_ms, std::uint32_t slots) {
  std::lock_guard lock(slot_wait_mutex_);
  slot_wait_.observe_hold(hold_ms);
  ms_per_request_ahead_.store(slot_wait_.ms_per_request_ahead(slots), std::memory_order_relaxed);
  std::array<double, policy::SlotWaitFit::kWindow> holds{};
  const auto count = slot_wait_.holds(holds);
  for (std::size_t index = 0; index < count; ++index) {
    slot_holds_[index].store(holds[index], std::memory_order_relaxed);
  }
  slot_hold_count_.store(count, std::memory_order_release);
}

void LearnedCosts::record_slot_free(double realized_over_priors, std::uint64_t fleet_mark) {
  std::lock_guard lock(slot_wait_mutex_);
  slot_wait_.observe_free(realized_over_priors);
  slot_free_level_.store(slot_wait_.free_level().value_or(-1), std::memory_order_relaxed);
  slot_free_mark_.store(std::max(fleet_mark, slot_free_mark_.load(std::memory_order_relaxed)),
                        std::memory_order_relaxed);
}

void LearnedCosts::record_answer_reuse(std::uint32_t reused_answer_tokens, std::uint32_t answer_tokens) {
  std::lock_guard lock(slot_wait_mutex_);
  answer_reuse_fit_.observe(reused_answer_tokens, answer_tokens);
  answer_reuse_.store(answer_reuse_fit_.share(), std::memory_order_relaxed);
}

std::size_t LearnedCosts::answer_reuse_samples() const {
  std::lock_guard lock(slot_wait_mutex_);
  return answer_reuse_fit_.samples();
}

std::size_t LearnedCosts::slot_holds(std::span<double, policy::SlotWaitFit::kWindow> out) const {
  const auto count = std::min(slot_hold_count_.load(std::memory_order_acquire), out.size());
  for (std::size_t index = 0; index < count; ++index) {
    out[index] = slot_holds_[index].load(std::memory_order_relaxed);
  }
  return count;
}

LearnedCosts::SlotWaitStatus LearnedCosts::slot_wait_status() const {
  std::lock_guard lock(slot_wait_mutex_);
  return {ms_per_request_ahead_.load(std::memory_order_relaxed),
          slot_wait_.wait_samples(),
          slot_wait_.hold_samples(),
          slot_wait_.from_waits(),
          slot_wait_.forecast_scale(),
          slot_wait_.forecast_samples(),
          slot_wait_.free_level(),
          slot_wait_.free_samples()};
}

policy::SpeedFit LearnedCosts::prefill_speed_fit() const {
  std::lock_guard lock(speed_mutex_);
  return speed_fit_;
}

}  // namespace kvgate::workers
