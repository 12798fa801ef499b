#include "kvgate/policy/recent_median.hpp"

#include <algorithm>

namespace kvgate::policy {

void RecentMedian::add(double value) {
  values[next] = value;
  next = (next + 1) % kWindow;
  count = std::min(count + 1, kWindow);
  std::array<double, kWindow> sorted = values;
  const auto middle = sorted.begin() + static_cast<std::ptrdiff_t>(count / 2);
  std::nth_element(sorted.begin(), middle, sorted.begin() + static_cast<std::ptrdiff_t>(count));
  median = *middle;
  if (count % 2 == 0) {
    const auto below = *std::max_element(sorted.begin(), middle);
    median = (median + below) / 2;
  }
}

}  // namespace kvgate::policy
