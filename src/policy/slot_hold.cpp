#include "kvgate/policy/slot_hold.hpp"

#include <cmath>

namespace kvgate::policy {

SlotHold choose_slot_hold(const ReturnModel& think, double reprefill_ms) {
  SlotHold best;
  if (!think.learned() || !(reprefill_ms > 0) || !std::isfinite(reprefill_ms)) {
    return best;
  }
  const double q = think.continuation();
  // The idle integral by the trapezoid rule over steps inside each bucket
  // (F is linear in log time inside a bucket: a few steps follow it).
  constexpr int kSteps = 8;
  double idle_ms = 0;
  double from_ms = 0;
  for (std::size_t bucket = 1; bucket < kAgeBuckets; ++bucket) {
    const double edge_ms = age_bucket_low_ms(bucket);
    if (edge_ms > 2 * reprefill_ms) {
      break;
    }
    const double step = (edge_ms - from_ms) / kSteps;
    for (int index = 0; index < kSteps; ++index) {
      const double low = from_ms + step * index;
      const double high = low + step;
      idle_ms += step * (2 - q * think.gap_cdf(low) - q * think.gap_cdf(high)) / 2;
    }
    from_ms = edge_ms;
    const double gain = q * think.gap_cdf(edge_ms) * reprefill_ms - idle_ms;
    if (gain > best.expected_gain_ms) {
      best = {edge_ms, gain};
    }
  }
  return best;
}

}  // namespace kvgate::policy
