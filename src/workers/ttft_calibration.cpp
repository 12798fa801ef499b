#include "kvgate/workers/ttft_calibration.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
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

void TtftCalibration::record(double expected_ms, double realized_ms, bool busy) {
  if (!std::isfinite(expected_ms) || !std::isfinite(realized_ms) || expected_ms <= 0 || realized_ms <= 0) {
    return;
  }
  const auto slot = next_.fetch_add(1, std::memory_order_relaxed) % kWindow;
  samples_[slot].expected_ms.store(static_cast<float>(expected_ms), std::memory_order_relaxed);
  samples_[slot].realized_ms.store(static_cast<float>(realized_ms), std::memory_order_relaxed);
  samples_[slot].busy.store(busy, std::memory_order_relaxed);
}

TtftCalibrationSummary TtftCalibration::summary() const {
  const auto recorded = next_.load(std::memory_order_relaxed);
  const auto count = static_cast<std::size_t>(std::min<std::uint64_t>(recorded, kWindow));
  std::vector<double> ratios;
  std::vector<double> errors;
  std::vector<double> busy;
  std::vector<double> idle;
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
    (samples_[at].busy.load(std::memory_order_relaxed) ? busy : idle).push_back(ratios.back());
  }
  TtftCalibrationSummary summary;
  summary.samples = static_cast<std::uint32_t>(ratios.size());
  if (ratios.empty()) {
    return summary;
  }
  summary.ratio_p50 = quantile(ratios, 0.5);
  summary.ratio_p90 = quantile(ratios, 0.9);
  summary.relative_error_p50 = quantile(errors, 0.5);
  summary.busy_samples = static_cast<std::uint32_t>(busy.size());
  summary.busy_ratio_p50 = busy.empty() ? 0 : quantile(busy, 0.5);
  summary.idle_ratio_p50 = idle.empty() ? 0 : quantile(idle, 0.5);
  return summary;
}

std::string likely_ttft_miscalibration(const TtftCalibrationSummary& summary) {
  constexpr auto kOff = TtftCalibration::kOffFactor;
  if (summary.samples < TtftCalibration::kMinSamples || (summary.ratio_p50 < kOff && summary.ratio_p50 > 1 / kOff)) {
    return {};
  }
  const auto idle_samples = summary.samples - summary.busy_samples;
  // Both kinds seen often enough to compare: a quarter of the minimum each.
  constexpr std::uint32_t kEach = TtftCalibration::kMinSamples / 4;
  std::array<char, 320> text{};
  if (summary.busy_samples >= kEach && idle_samples >= kEach &&
      summary.busy_ratio_p50 >= kOff * summary.idle_ratio_p50) {
    std::snprintf(text.data(), text.size(),
                  "requests sent while it was busy took %.2fx their expected first token, idle ones %.2fx: it "
                  "admits fewer at once than the queue is priced for (llama-server's slots, vLLM's max_num_seqs "
                  "or batch tokens), so requests wait beyond the priced queue",
                  summary.busy_ratio_p50, summary.idle_ratio_p50);
  } else {
    std::snprintf(text.data(), text.size(),
                  "its first tokens come %.2fx the expected, idle and busy alike: its prefill or first step is "
                  "priced off (an engine whose speed its counters or the priors misstate)",
                  summary.ratio_p50);
  }
  return text.data();
}

}  // namespace kvgate::workers
