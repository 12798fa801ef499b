#include "kvgate/policy/slot_wait.hpp"

#include <algorithm>
#include <cmath>

namespace kvgate::policy {

void SlotWaitFit::Window::add(double value) {
  values[next] = value;
  next = (next + 1) % kWindow;
  count = std::min(count + 1, kWindow);
  // The median is kept current here, on the writer's side: the reader gets
  // a figure, never a sort. A copy on the stack, no allocation.
  std::array<double, kWindow> sorted = values;
  const auto middle = sorted.begin() + static_cast<std::ptrdiff_t>(count / 2);
  std::nth_element(sorted.begin(), middle, sorted.begin() + static_cast<std::ptrdiff_t>(count));
  median = *middle;
  if (count % 2 == 0) {
    const auto below = *std::max_element(sorted.begin(), middle);
    median = (median + below) / 2;
  }
}

void SlotWaitFit::observe_wait(std::uint32_t ahead, double excess_ms) {
  if (ahead == 0 || !std::isfinite(excess_ms)) {
    return;
  }
  waits_.add(std::max(0.0, excess_ms) / static_cast<double>(ahead));
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

}  // namespace kvgate::policy
