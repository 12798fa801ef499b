#include "kvgate/admission/token_bucket.hpp"

#include <algorithm>
#include <cmath>

namespace kvgate::admission {

void TokenBucket::refill(std::uint64_t now_ms) {
  if (now_ms > updated_ms_) {
    level_ = std::min(per_minute_, level_ + static_cast<double>(now_ms - updated_ms_) * per_minute_ / 60'000.0);
    updated_ms_ = now_ms;
  }
}

double TokenBucket::level(std::uint64_t now_ms) const {
  if (now_ms <= updated_ms_) {
    return level_;
  }
  return std::min(per_minute_, level_ + static_cast<double>(now_ms - updated_ms_) * per_minute_ / 60'000.0);
}

std::uint64_t TokenBucket::wait_ms(std::uint64_t now_ms) const {
  const double current = level(now_ms);
  // A continuous refill would make any level "above zero" a moment later:
  // a whole unit is what a request needs.
  const double needed = std::min(1.0, per_minute_);
  if (current >= needed) {
    return 0;
  }
  const double wait = (needed - current) * 60'000.0 / per_minute_;
  // Less a rounding error's worth, so a level 1 ms short waits 1 ms, not 2.
  return std::max<std::uint64_t>(1, static_cast<std::uint64_t>(std::ceil(wait - 1e-6)));
}

void TokenBucket::take(double amount, std::uint64_t now_ms) {
  refill(now_ms);
  level_ -= amount;
}

std::uint64_t TokenBucket::try_take(double amount, std::uint64_t now_ms) {
  const auto wait = wait_ms(now_ms);
  if (wait == 0) {
    take(amount, now_ms);
  }
  return wait;
}

void TokenBucket::set_per_minute(double per_minute) {
  per_minute_ = per_minute;
  level_ = std::min(level_, per_minute_);
}

}  // namespace kvgate::admission
