#include "kvgate/policy/slot_wait.hpp"

#include <gtest/gtest.h>

#include <array>
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

// A hold already under way has the rest of the holds that lasted longer:
// the nearer a request is to its end, the sooner its slot frees.
TEST(SlotReleases, AHoldUnderWayHasTheRestOfTheLongerHolds) {
  const std::array<double, 4> holds{400, 800, 1'200, 1'600};
  EXPECT_DOUBLE_EQ(remaining_hold_ms(holds, 0), 1'000);
  EXPECT_DOUBLE_EQ(remaining_hold_ms(holds, 1'000), 400);  // 200 and 600 left
  EXPECT_DOUBLE_EQ(remaining_hold_ms(holds, 1'600), 0);    // longer than every recent one: ending
  EXPECT_DOUBLE_EQ(remaining_hold_ms({}, 100), 0);
  // An occupant seen at no particular moment: long holds are caught in
  // progress as often as they last, so more than half the mean hold.
  EXPECT_DOUBLE_EQ(unseen_remaining_hold_ms(holds),
                   (400.0 * 400 + 800 * 800 + 1'200 * 1'200 + 1'600 * 1'600) / (2 * 4'000.0));
  EXPECT_DOUBLE_EQ(unseen_remaining_hold_ms({}), 0);
}

// Two slots held 900 ms and 100 ms by this gateway's requests (holds of
// 1 s): the first frees in 100 ms, the second in 900; a third request
// ahead takes the first and holds it a mean hold.
TEST(SlotReleases, TheWaitIsTheReleaseTheRequestWaitsFor) {
  const std::array<double, 3> holds{1'000, 1'000, 1'000};
  const std::array<double, 2> held{100, 900};
  const auto releases = forecast_releases(holds, held, 2);
  ASSERT_EQ(releases.count, 2u);
  EXPECT_DOUBLE_EQ(releases.in_ms[0], 100);
  EXPECT_DOUBLE_EQ(releases.in_ms[1], 900);
  EXPECT_DOUBLE_EQ(releases.mean_hold_ms, 1'000);
  EXPECT_DOUBLE_EQ(wait_for_slot_ms(releases, 1), 100);
  EXPECT_DOUBLE_EQ(wait_for_slot_ms(releases, 2), 900);
  EXPECT_DOUBLE_EQ(wait_for_slot_ms(releases, 3), 1'100);  // the first slot's second release
  EXPECT_DOUBLE_EQ(wait_for_slot_ms(releases, 0), 0);
  // Beyond the simulated rounds the releases come a mean hold over the
  // slots apart.
  const auto far = wait_for_slot_ms(releases, 10'001);
  EXPECT_NEAR(far, 100 + 5'000.0 * 1'000, 1'000);
}

// Slots the gateway's requests do not account for hold a request it did
// not send, seen at no particular moment.
TEST(SlotReleases, SlotsNotHeldByTrackedRequestsHoldAnUnseenOne) {
  const std::array<double, 2> holds{500, 1'500};
  const std::array<double, 1> held{1'400};
  const auto releases = forecast_releases(holds, held, 3);
  ASSERT_EQ(releases.count, 3u);
  EXPECT_DOUBLE_EQ(releases.in_ms[0], 100);
  EXPECT_DOUBLE_EQ(releases.in_ms[1], unseen_remaining_hold_ms(holds));
  EXPECT_DOUBLE_EQ(releases.in_ms[2], unseen_remaining_hold_ms(holds));
  // More running than slots (the engine has more than modelled): the
  // longest-held fill the slots.
  const std::array<double, 3> crowded{1'400, 10, 600};
  const auto two = forecast_releases(holds, crowded, 2);
  EXPECT_DOUBLE_EQ(two.in_ms[0], 100);
  EXPECT_DOUBLE_EQ(two.in_ms[1], 900);
}

// Requests that waited correct the forecast by the median of their waits
// over it; waits that were not forecast teach only the figure per request
// ahead.
TEST(SlotReleases, WhatRequestsWaitedCorrectsTheForecast) {
  SlotWaitFit fit;
  fit.observe_wait(2, 600);
  EXPECT_EQ(fit.forecast_samples(), 0u);
  fit.observe_wait(1, 300, 600);
  fit.observe_wait(1, 450, 600);
  EXPECT_DOUBLE_EQ(fit.forecast_scale(), 1);  // two are not enough yet
  fit.observe_wait(1, -50, 100);              // no wait at all
  EXPECT_DOUBLE_EQ(fit.forecast_scale(), 0.5);
  fit.observe_wait(1, 100, std::numeric_limits<double>::quiet_NaN());
  EXPECT_EQ(fit.forecast_samples(), 3u);
}

// Requests that found a slot free show the slot worker's price level: the
// median of their first tokens over their price at the priors.
TEST(SlotReleases, FreeSlotAnswersShowThePriceLevel) {
  SlotWaitFit fit;
  fit.observe_free(5.0);
  fit.observe_free(6.0);
  EXPECT_FALSE(fit.free_level());
  fit.observe_free(std::numeric_limits<double>::infinity());
  fit.observe_free(-1);
  EXPECT_EQ(fit.free_samples(), 2u);
  fit.observe_free(20.0);
  EXPECT_DOUBLE_EQ(fit.free_level().value_or(0), 6.0);
}

// A worker's own free-slot level stands until the fleet has taught a
// whole window of free-slot answers since its last; then it is priced at
// most at the fleet's median (never raised to it).
TEST(SlotReleases, AStaleFreeLevelIsPricedAtMostAtTheFleetsMedian) {
  constexpr auto kWindow = SlotWaitFit::kWindow;
  const FreeLevelFreshness fresh{100, 100 + kWindow - 1, 2.0};
  EXPECT_FALSE(free_level_stale(fresh));
  EXPECT_DOUBLE_EQ(priced_free_level(6.0, fresh), 6.0);
  const FreeLevelFreshness stale{100, 100 + kWindow, 2.0};
  EXPECT_TRUE(free_level_stale(stale));
  EXPECT_DOUBLE_EQ(priced_free_level(6.0, stale), 2.0);
  EXPECT_DOUBLE_EQ(priced_free_level(1.5, stale), 1.5);
  // No fleet level known, or not a number: its own.
  EXPECT_DOUBLE_EQ(priced_free_level(6.0, {100, 500, 0.0}), 6.0);
  EXPECT_DOUBLE_EQ(priced_free_level(6.0, {100, 500, std::numeric_limits<double>::quiet_NaN()}), 6.0);
  // A mark past the fleet's count (a count kept elsewhere) is not stale.
  EXPECT_FALSE(free_level_stale({500, 100, 2.0}));
}

TEST(SlotReleases, NoHoldsOrTooManySlotsIsNoForecast) {
  const std::array<double, 1> holds{1'000};
  EXPECT_EQ(forecast_releases({}, {}, 2).count, 0u);
  EXPECT_EQ(forecast_releases(holds, {}, 0).count, 0u);
  EXPECT_EQ(forecast_releases(holds, {}, SlotReleases::kMaxSlots + 1).count, 0u);
  EXPECT_EQ(wait_for_slot_ms(SlotReleases{}, 3), 0);
  SlotWaitFit fit;
  std::array<double, SlotWaitFit::kWindow> out{};
  EXPECT_EQ(fit.holds(out), 0u);
  fit.observe_hold(700);
  fit.observe_hold(900);
  ASSERT_EQ(fit.holds(out), 2u);
  EXPECT_DOUBLE_EQ(out[0] + out[1], 1'600);
}

}  // namespace
}  // namespace kvgate::policy
