#include "kvgate/workers/slot_holds.hpp"

#include <gtest/gtest.h>

#include <thread>
#include <vector>

namespace kvgate::workers {
namespace {

// A hold keeps a slot from every other session until it ends or its own
// session's turn takes it.
TEST(SlotHolds, AHoldCountsForOtherSessionsUntilItEndsOrIsTaken) {
  SlotHolds holds;
  EXPECT_TRUE(holds.hold(7, 1'500, 1'000));
  EXPECT_TRUE(holds.hold(9, 1'200, 1'000));
  EXPECT_EQ(holds.held_for_others(7, 1'100), 1u);
  EXPECT_EQ(holds.held_for_others(8, 1'100), 2u);
  EXPECT_EQ(holds.held_for_others(0, 1'100), 2u);
  EXPECT_EQ(holds.next_end(1'100), 1'200u);
  EXPECT_TRUE(holds.kept_for(7, 1'100));
  EXPECT_FALSE(holds.kept_for(8, 1'100));
  EXPECT_FALSE(holds.kept_for(0, 1'100));
  // Session 9's hold ends unused.
  EXPECT_EQ(holds.held_for_others(8, 1'200), 1u);
  EXPECT_EQ(holds.next_end(1'200), 1'500u);
  EXPECT_FALSE(holds.take(9, 1'200));
  // Session 7's turn comes.
  EXPECT_FALSE(holds.kept_for(9, 1'200));
  EXPECT_TRUE(holds.take(7, 1'300));
  EXPECT_FALSE(holds.kept_for(7, 1'300));
  EXPECT_EQ(holds.held_for_others(8, 1'300), 0u);
  EXPECT_EQ(holds.next_end(1'300), std::nullopt);
  EXPECT_FALSE(holds.take(7, 1'300));
}

// A session's new hold replaces its old one; no session or no time holds
// nothing; ended holds make room for new ones, and a full table keeps none.
TEST(SlotHolds, OneHoldPerSessionAndAtMostTheTablesWorth) {
  SlotHolds holds;
  EXPECT_FALSE(holds.hold(0, 2'000, 1'000));
  EXPECT_FALSE(holds.hold(5, 1'000, 1'000));
  EXPECT_TRUE(holds.hold(5, 1'100, 1'000));
  EXPECT_TRUE(holds.hold(5, 1'400, 1'050));
  EXPECT_EQ(holds.held_for_others(0, 1'200), 1u);
  for (std::uint64_t session = 100; session < 100 + SlotHolds::kCapacity - 1; ++session) {
    EXPECT_TRUE(holds.hold(session, 3'000, 1'000));
  }
  EXPECT_FALSE(holds.hold(999, 3'000, 1'000));
  EXPECT_EQ(holds.held_for_others(0, 1'200), SlotHolds::kCapacity);
  // Session 5's hold has ended by 1'500: its entry is free again.
  EXPECT_TRUE(holds.hold(999, 3'000, 1'500));
  EXPECT_EQ(holds.held_for_others(999, 1'500), SlotHolds::kCapacity - 1);
}

// Threads holding and taking their own sessions' slots at once (run under
// ThreadSanitizer in the test command): once all are taken, nothing is held.
TEST(SlotHolds, ConcurrentSessionsLeaveNothingHeld) {
  SlotHolds holds;
  std::vector<std::thread> threads;
  for (std::uint64_t thread = 0; thread < 4; ++thread) {
    threads.emplace_back([&holds, thread] {
      for (std::uint64_t turn = 0; turn < 2'000; ++turn) {
        const std::uint64_t session = 1 + thread * 4 + turn % 4;
        static_cast<void>(holds.hold(session, 1'000'000, 10));
        static_cast<void>(holds.held_for_others(session, 10));
        static_cast<void>(holds.take(session, 10));
      }
    });
  }
  for (auto& thread : threads) {
    thread.join();
  }
  EXPECT_EQ(holds.held_for_others(0, 10), 0u);
}

}  // namespace
}  // namespace kvgate::workers
