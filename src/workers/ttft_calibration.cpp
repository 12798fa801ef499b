#include "kvgate/workers/ttft_calibration.hpp"

#include <algorithm>
#include <cmath>
#include <vector>

namespace kvgate::workers {
namespace {

// The q-quantile of `values` (nearest rank); `values` is reordered.
double quantile(std::vector<double>& values, double q) {
  const auto rank = static_cast<std::size_t>(std::ceil(q * static_cast<double>(values.size()))) - 1;
  const auto at = values.begin() + static_cast<std::ptrdiff_t>(std::min(rank, values.size() - 1));
  std::nth_element(values.begin(), at, values.end());
  return *at;
}

}  // namespace

void TtftCalibration::record(double expected_ms, double realized_ms) {
  if (!std::isfinite(expected_ms) || !std::isfinite(realized_ms) || expected_ms <= 0 || realized_ms <= 0) {
    return;
  }
  const auto slot = next_.fetch_add(1, std::memory_order_relaxed) % kWindow;
  samples_[slot].expected_ms.store(static_cast<float>(expected_ms), std::memory_order_relaxed);
  samples_[slot].realized_ms.store(static_cast<float>(realized_ms), std::memory_order_relaxed);
}

TtftCalibrationSummary TtftCalibration::summary() const {
  const auto recorded = next_.load(std::memory_order_relaxed);
  const auto count = static_cast<std::size_t>(std::min<std::uint64_t>(recorded, kWindow));
  std::vector<double> ratios;
  std::vector<double> errors;
  ratios.reserve(count);
  errors.reserve(count);
  for (std::size_t at = 0; at < count; ++at) {
    const double expected = samples_[at].expected_ms.load(std::memory_order_relaxed);
    const double realized = samples_[at].realized_ms.load(std::memory_order_relaxed);
    if (expected <= 0 || realized <= 0) {
      continue;  // claimed by a writer that has not stored yet
    }
    ratios.push_back(realized / expected);
    errors.push_back(std::abs(realized - expected) / realized);
  }
  TtftCalibrationSummary summary;
  summary.samples = static_cast<std::uint32_t>(ratios.size());
  if (ratios.empty()) {
    return summary;
  }
  summary.ratio_p50 = quantile(ratios, 0.5);
  summary.ratio_p90 = quantile(ratios, 0.9);
  summary.relative_error_p50 = quantile(errors, 0.5);
  return summary;
}

}  // namespace kvgate::workers
