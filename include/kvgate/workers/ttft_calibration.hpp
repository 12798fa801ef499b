#pragma once
// How a worker's expected time to first token compares with the one its
// clients got: the last kWindow clean first attempts' realized/expected
// ratios, summarised as the median and p90 ratio and the median error as a
// share of the realized TTFT. Only what was observed counts: a request
// without an expectation (a policy that prices no TTFT), without a first
// token (cancelled, failed, retried), or with a non-finite or non-positive
// figure is not a sample, so nothing divides by zero and a flood of
// cancellations changes nothing.
//
// Written by any I/O thread when an attempt completes (one relaxed atomic
// add and store: no lock on the request path); read by the admin plane and
// the metrics exposition, which copy the window (a sample being written
// may be read old or new; each is a whole value).
#include <array>
#include <atomic>
#include <cstdint>
#include <string>

namespace kvgate::workers {

struct TtftCalibrationSummary {
  std::uint32_t samples = 0;  // in the window
  double ratio_p50 = 0;       // realized / expected
  double ratio_p90 = 0;
  double relative_error_p50 = 0;  // |realized - expected| / realized
  // The same median for requests dispatched while the worker was busy
  // (another request of this gateway in flight there, or the engine
  // reporting others waiting) and while it was idle.
  std::uint32_t busy_samples = 0;
  double busy_ratio_p50 = 0;
  double idle_ratio_p50 = 0;
};

class TtftCalibration {
 public:
  static constexpr std::uint32_t kWindow = 128;
  // Fewer samples than this say nothing persistent.
  static constexpr std::uint32_t kMinSamples = 32;
  // A median twice (or half) the expectation: beyond what one queue's
  // variation explains, a price that is wrong.
  static constexpr double kOffFactor = 2.0;

  // `busy`: the worker had other requests in flight or waiting at dispatch.
  void record(double expected_ms, double realized_ms, bool busy = false);
  // Whether the worker is reported as off (to log each change once);
  // returns the previous state.
  bool exchange_flagged(bool flagged) { return flagged_.exchange(flagged, std::memory_order_relaxed); }
  [[nodiscard]] TtftCalibrationSummary summary() const;
  [[nodiscard]] std::uint64_t recorded() const { return next_.load(std::memory_order_relaxed); }

 private:
  struct Sample {
    std::atomic<float> expected_ms{0};
    std::atomic<float> realized_ms{0};
    std::atomic<bool> busy{false};
  };
  std::array<Sample, kWindow> samples_{};
  std::atomic<std::uint64_t> next_{0};
  std::atomic<bool> flagged_{false};
};

// A worker whose expectations are persistently off (the median ratio
// beyond kOffFactor either way, over at least kMinSamples), with the likely
// cause its own samples point to; empty when it is not off.
std::string likely_ttft_miscalibration(const TtftCalibrationSummary& summary);

}  // namespace kvgate::workers
