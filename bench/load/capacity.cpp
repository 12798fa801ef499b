#include "capacity.hpp"

#include <algorithm>

namespace kvgate::load {

std::optional<double> CapacitySearch::next() const {
  if (steps_ >= max_steps_) {
    return std::nullopt;
  }
  if (failed_ && held_ > 0 && (*failed_ - held_) <= resolution_ * held_) {
    return std::nullopt;
  }
  return next_;
}

void CapacitySearch::record(double rate, bool slo_held) {
  ++steps_;
  if (slo_held) {
    held_ = std::max(held_, rate);
  } else if (!failed_ || rate < *failed_) {
    failed_ = rate;
  }
  if (!failed_) {
    next_ = held_ * 2;  // nothing failed yet: look higher
  } else if (held_ == 0) {
    next_ = *failed_ / 2;  // nothing held yet: look lower
  } else {
    next_ = (held_ + *failed_) / 2;
  }
}

}  // namespace kvgate::load
