#include "kvgate/policy/slot_wait.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

namespace kvgate::policy {
namespace {

TEST(SlotWaitFit, NothingLearnedIsNoWaitAndNoSlotsIsNoWait) {
  SlotWaitFit fit;
  EXPECT_EQ(fit.ms_per_request_ahead(2), 0);
  fit.observe_hold(1'000);
  EXPECT_EQ(fit.ms_per_request_ahead(0), 0);
}

// Before enough requests waited, a full pool's releases come one hold over
// the slots apart: the median hold, so one long answer does not move it.
TEST(SlotWaitFit, HoldsOverTheSlotsStandInUntilEnoughRequestsWaited) {
  SlotWaitFit fit;
  for (double hold : {800.0, 1'000.0, 20'000.0}) {
    fit.observe_hold(hold);
  }
  EXPECT_DOUBLE_EQ(fit.ms_per_request_ahead(2), 500);
  EXPECT_FALSE(fit.from_waits());
  // Waits per request ahead: 300, 300 (600 over two ahead), 360.
  fit.observe_wait(1, 300);
  fit.observe_wait(2, 600);
  EXPECT_DOUBLE_EQ(fit.ms_per_request_ahead(2), 500);  // two waits are not enough yet
  fit.observe_wait(1, 360);
  EXPECT_TRUE(fit.from_waits());
  EXPECT_DOUBLE_EQ(fit.ms_per_request_ahead(2), 300);
  EXPECT_DOUBLE_EQ(fit.ms_per_request_ahead(4), 300);  // measured, not divided
}

// What cannot be observed is not a sample: nothing ahead, a non-finite
// figure, a non-positive hold. A negative excess (the prefill priced high)
// is a wait of nothing.
TEST(SlotWaitFit, WhatCannotBeObservedIsNotASample) {
  SlotWaitFit fit;
  fit.observe_wait(0, 500);
  fit.observe_wait(1, std::numeric_limits<double>::quiet_NaN());
  fit.observe_wait(1, std::numeric_limits<double>::infinity());
  fit.observe_hold(0);
  fit.observe_hold(-5);
  fit.observe_hold(std::numeric_limits<double>::quiet_NaN());
  EXPECT_EQ(fit.wait_samples(), 0u);
  EXPECT_EQ(fit.hold_samples(), 0u);
  for (int sample = 0; sample < 3; ++sample) {
    fit.observe_wait(1, -200);
  }
  EXPECT_EQ(fit.wait_samples(), 3u);
  EXPECT_EQ(fit.ms_per_request_ahead(2), 0);
}

// The window keeps the recent samples: a worker whose answers got longer is
// priced by the new waits once they are most of the window.
TEST(SlotWaitFit, TheWindowFollowsRecentWaits) {
  SlotWaitFit fit;
  for (std::size_t sample = 0; sample < SlotWaitFit::kWindow; ++sample) {
    fit.observe_wait(1, 100);
  }
  EXPECT_DOUBLE_EQ(fit.ms_per_request_ahead(2), 100);
  for (std::size_t sample = 0; sample < SlotWaitFit::kWindow / 2 + 1; ++sample) {
    fit.observe_wait(1, 900);
  }
  EXPECT_DOUBLE_EQ(fit.ms_per_request_ahead(2), 900);
  EXPECT_EQ(fit.wait_samples(), SlotWaitFit::kWindow);
}

TEST(SlotWaitFit, AnEvenCountTakesTheMeanOfTheMiddleTwo) {
  SlotWaitFit fit;
  for (double wait : {100.0, 200.0, 300.0, 400.0}) {
    fit.observe_wait(1, wait);
  }
  EXPECT_DOUBLE_EQ(fit.ms_per_request_ahead(1), 250);
}

}  // namespace
}  // namespace kvgate::policy
