#include "kvgate/core/clock.hpp"

#include <gtest/gtest.h>

namespace kvgate {
namespace {

// A monotonic stamp shown as a Unix time: the same distance from now on
// both clocks, whichever side of now it lies.
TEST(Clock, AMonotonicStampIsShownAtTheSameDistanceFromNow) {
  constexpr std::uint64_t monotonic_now = 5'000'000;
  constexpr std::uint64_t unix_now = 1'700'000'000'000;
  EXPECT_EQ(to_unix_ms(monotonic_now, monotonic_now, unix_now), unix_now);
  EXPECT_EQ(to_unix_ms(monotonic_now - 1'500, monotonic_now, unix_now), unix_now - 1'500);
  EXPECT_EQ(to_unix_ms(monotonic_now + 60'000, monotonic_now, unix_now), unix_now + 60'000);
  // Never before the epoch.
  EXPECT_EQ(to_unix_ms(0, monotonic_now, 1'000), 0u);
}

TEST(Clock, TheMonotonicClockNeverGoesBack) {
  auto previous = monotonic_now_ms();
  for (int read = 0; read < 1'000; ++read) {
    const auto now = monotonic_now_ms();
    ASSERT_GE(now, previous);
    previous = now;
  }
}

}  // namespace
}  // namespace kvgate
