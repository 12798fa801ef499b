#include "kvgate/policy/slot_hold.hpp"

#include <gtest/gtest.h>

namespace kvgate::policy {
namespace {

// `share` of the turns are followed by another, each after a think time in
// the bucket of `think_ms`.
ReturnModel thinking(double think_ms, double share) {
  AgeHistogram gaps{};
  gaps[age_bucket(think_ms)] = 1'000;
  const auto turns = static_cast<std::uint64_t>(1'000 / share);
  return {gaps, turns, turns - 1'000};
}

TEST(SlotHold, NothingIsHeldBeforeTheThinkTimesAreLearned) {
  EXPECT_EQ(choose_slot_hold(ReturnModel(), 2'000).hold_ms, 0);
  AgeHistogram few{};
  few[0] = ReturnModel::kMinGaps - 1;
  EXPECT_EQ(choose_slot_hold(ReturnModel(few, 100, 10), 2'000).hold_ms, 0);
  EXPECT_EQ(choose_slot_hold(thinking(50, 0.9), 0).hold_ms, 0);
}

// Agents' tool loops: the next turn comes within 100 ms. A slot whose
// history takes 2 s to compute again is kept until the turns have come
// (the first bucket's edge), and the gain is most of the re-prefill.
TEST(SlotHold, AConversationThatComesBackAtOnceKeepsItsSlot) {
  const auto hold = choose_slot_hold(thinking(50, 0.9), 2'000);
  EXPECT_EQ(hold.hold_ms, age_bucket_low_ms(1));
  EXPECT_GT(hold.expected_gain_ms, 0.8 * 2'000 - age_bucket_low_ms(1));
}

// A user who reads for half a minute: keeping the slot idle that long
// costs more than computing the history again.
TEST(SlotHold, ASlotIsNotKeptLongerThanTheReprefillItSaves) {
  EXPECT_EQ(choose_slot_hold(thinking(30'000, 0.9), 2'000).hold_ms, 0);
  // ... unless the history is longer to compute than the wait.
  EXPECT_GT(choose_slot_hold(thinking(30'000, 0.9), 120'000).hold_ms, 30'000);
}

// The same think times, fewer conversations that go on: less to gain, and
// at some point nothing.
TEST(SlotHold, ConversationsThatEndAreNotWaitedFor) {
  const auto most = choose_slot_hold(thinking(300, 0.9), 1'000);
  const auto some = choose_slot_hold(thinking(300, 0.5), 1'000);
  EXPECT_GT(most.expected_gain_ms, some.expected_gain_ms);
  EXPECT_GT(some.hold_ms, 0);
  EXPECT_EQ(choose_slot_hold(thinking(300, 0.2), 1'000).hold_ms, 0);
}

}  // namespace
}  // namespace kvgate::policy
