#include "kvgate/policy/slot_wait.hpp"

#include <algorithm>
#include <cmath>
#include <functional>

namespace kvgate::policy {

void SlotWaitFit::observe_wait(std::uint32_t ahead, double excess_ms, double forecast_ms) {
  if (ahead == 0 || !std::isfinite(excess_ms)) {
    return;
  }
  waits_.add(std::max(0.0, excess_ms) / static_cast<double>(ahead));
  if (std::isfinite(forecast_ms) && forecast_ms > 0) {
    ratios_.add(std::max(0.0, excess_ms) / forecast_ms);
  }
}

void SlotWaitFit::observe_free(double realized_over_priors) {
  if (std::isfinite(realized_over_priors) && realized_over_priors >= 0) {
    free_.add(realized_over_priors);
  }
}

bool free_level_stale(const FreeLevelFreshness& freshness) {
  return freshness.fleet_answers >= freshness.own_mark &&
         freshness.fleet_answers - freshness.own_mark >= SlotWaitFit::kWindow;
}

double priced_free_level(double own_level, const FreeLevelFreshness& freshness) {
  if (!free_level_stale(freshness) || !(freshness.fleet_median > 0) || !std::isfinite(freshness.fleet_median)) {
    return own_level;
  }
  return std::min(own_level, freshness.fleet_median);
}

void SlotWaitFit::observe_hold(double hold_ms) {
  if (!std::isfinite(hold_ms) || hold_ms <= 0) {
    return;
  }
  holds_.add(hold_ms);
}

double SlotWaitFit::ms_per_request_ahead(std::uint32_t slots) const {
  if (slots == 0) {
    return 0;
  }
  if (from_waits()) {
    return waits_.median;
  }
  return holds_.count == 0 ? 0.0 : holds_.median / static_cast<double>(slots);
}

std::size_t SlotWaitFit::holds(std::span<double, kWindow> out) const {
  std::copy_n(holds_.values.begin(), holds_.count, out.begin());
  return holds_.count;
}

double remaining_hold_ms(std::span<const double> holds, double held_ms) {
  double sum = 0;
  std::size_t longer = 0;
  for (const double hold : holds) {
    if (hold > held_ms) {
      sum += hold - held_ms;
      ++longer;
    }
  }
  return longer == 0 ? 0.0 : sum / static_cast<double>(longer);
}

double unseen_remaining_hold_ms(std::span<const double> holds) {
  double sum = 0;
  double squares = 0;
  for (const double hold : holds) {
    sum += hold;
    squares += hold * hold;
  }
  return sum > 0 ? squares / (2 * sum) : 0.0;
}

SlotReleases forecast_releases(std::span<const double> holds, std::span<const double> held_ms, std::uint32_t slots) {
  SlotReleases releases;
  if (holds.empty() || slots == 0 || slots > SlotReleases::kMaxSlots) {
    return releases;
  }
  double sum = 0;
  for (const double hold : holds) {
    sum += hold;
  }
  releases.mean_hold_ms = sum / static_cast<double>(holds.size());
  // More running than slots: the engine has more than modelled; the
  // longest-held are the ones the model would have placed first.
  std::array<double, SlotReleases::kMaxSlots> running{};
  const auto tracked = std::min<std::size_t>(held_ms.size(), slots);
  std::partial_sort_copy(held_ms.begin(), held_ms.end(), running.begin(),
                         running.begin() + static_cast<std::ptrdiff_t>(tracked), std::greater<>());
  const double unseen = unseen_remaining_hold_ms(holds);
  for (std::uint32_t slot = 0; slot < slots; ++slot) {
    releases.in_ms[slot] = slot < tracked ? remaining_hold_ms(holds, std::max(0.0, running[slot])) : unseen;
  }
  releases.count = slots;
  std::sort(releases.in_ms.begin(), releases.in_ms.begin() + slots);
  return releases;
}

double wait_for_slot_ms(const SlotReleases& releases, std::uint32_t ahead) {
  if (ahead == 0 || releases.count == 0) {
    return 0;
  }
  // Each request ahead takes the earliest release and frees its slot one
  // mean hold later; past a pool's worth of rounds the releases are one
  // mean hold over the slots apart, so the rest is counted, not simulated.
  constexpr std::uint32_t kSimulated = 64 * SlotReleases::kMaxSlots;
  std::array<double, SlotReleases::kMaxSlots> free_at = releases.in_ms;
  const auto slots = static_cast<std::ptrdiff_t>(releases.count);
  const auto simulated = std::min(ahead - 1, kSimulated);
  for (std::uint32_t request = 0; request < simulated; ++request) {
    auto earliest = std::min_element(free_at.begin(), free_at.begin() + slots);
    *earliest += releases.mean_hold_ms;
  }
  const double rest = static_cast<double>(ahead - 1 - simulated) * releases.mean_hold_ms / static_cast<double>(slots);
  return *std::min_element(free_at.begin(), free_at.begin() + slots) + rest;
}

}  // namespace kvgate::policy
