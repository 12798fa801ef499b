#include "kvgate/route/session_gaps.hpp"

#include <gtest/gtest.h>

namespace kvgate::route {
namespace {

TEST(SessionGaps, LearnsHowOftenAndHowSoonConversationsComeBack) {
  SessionGaps gaps;
  EXPECT_FALSE(gaps.model().learned());
  // 40 sessions of 5 turns, 700 ms apart.
  for (int session = 0; session < 40; ++session) {
    gaps.record_first_turn();
    for (int turn = 1; turn < 5; ++turn) {
      gaps.record_next_turn(700);
    }
  }
  const auto counts = gaps.counts();
  EXPECT_EQ(counts.turns, 200u);
  EXPECT_EQ(counts.sessions, 40u);
  EXPECT_EQ(counts.gaps[policy::age_bucket(700)], 160u);
  const auto model = gaps.model();
  ASSERT_TRUE(model.learned());
  EXPECT_DOUBLE_EQ(model.continuation(), 0.8);
  EXPECT_GT(model.probability(100, 60'000), 0.7);
  EXPECT_EQ(model.probability(5'000, 60'000), 0);
}

TEST(SessionGaps, HalvesItsCountsToFollowChangingTraffic) {
  SessionGaps gaps;
  for (std::uint64_t turn = 0; turn + 1 < SessionGaps::kHalveAt; ++turn) {
    if (turn % 4 == 0) {
      gaps.record_first_turn();
    } else {
      gaps.record_next_turn(300);
    }
  }
  EXPECT_EQ(gaps.counts().turns, SessionGaps::kHalveAt - 1);
  gaps.record_next_turn(300);
  const auto halved = gaps.counts();
  EXPECT_EQ(halved.turns, SessionGaps::kHalveAt / 2);
  EXPECT_EQ(halved.sessions, SessionGaps::kHalveAt / 8);
  EXPECT_NEAR(gaps.model().continuation(), 0.75, 1e-3);
}

}  // namespace
}  // namespace kvgate::route
