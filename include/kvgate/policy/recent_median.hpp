#pragma once
// The median of a figure's last kWindow samples, so that one outlier does
// not move it. Kept current by the writer on each sample (a copy on the
// stack, no allocation): a reader gets a number, never a sort. Pure.
#include <array>
#include <cstddef>

namespace kvgate::policy {

struct RecentMedian {
  static constexpr std::size_t kWindow = 16;
  std::array<double, kWindow> values{};  // the last `count` samples, in no order
  std::size_t count = 0;                 // up to kWindow
  std::size_t next = 0;                  // where the next sample goes
  double median = 0;                     // of the `count` samples (0 before any)
  void add(double value);
};

}  // namespace kvgate::policy
