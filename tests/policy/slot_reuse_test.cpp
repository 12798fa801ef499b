#include "kvgate/policy/slot_reuse.hpp"

#include <gtest/gtest.h>

namespace kvgate::policy {
namespace {

// A previous turn of 2,527 prompt tokens (157 whole blocks of 16) that
// generated 32: its idle slot holds 2,559 tokens the next prompt repeats.
SlotContinuation next_turn(std::uint32_t credited, double answer_reuse = 1) {  // a worker that reuses answers whole
  return {credited, 2527, 32, true, answer_reuse, 3178, 16};
}

TEST(SlotContinuation, ThePreviousSlotGivesItsPartialBlockAndTheReusedAnswer) {
  EXPECT_TRUE(continues_previous_slot(next_turn(157 * 16)));
  EXPECT_EQ(slot_continuation_tokens(next_turn(157 * 16)), 2559u);
  EXPECT_EQ(slot_continuation_tokens(next_turn(157 * 16, 0.5)), 2543u);
  EXPECT_EQ(slot_continuation_tokens(next_turn(157 * 16, 0)), 2527u);
}

TEST(SlotContinuation, AnyOtherMatchKeepsTheIndexsFigure) {
  EXPECT_EQ(slot_continuation_tokens(next_turn(100 * 16)), 1600u);  // the slot lost its head
  EXPECT_EQ(slot_continuation_tokens(next_turn(170 * 16)), 2720u);  // another slot holds more
  EXPECT_EQ(slot_continuation_tokens(next_turn(0)), 0u);
  auto unread = next_turn(157 * 16);
  unread.answered = false;  // the answer's usage not read (yet)
  EXPECT_FALSE(continues_previous_slot(unread));
  EXPECT_EQ(slot_continuation_tokens(unread), 2512u);
}

TEST(SlotContinuation, NeverThePromptsLastToken) {
  SlotContinuation turn{157 * 16, 2527, 32, true, 1, 2540, 16};  // a prompt shorter than the slot's content
  EXPECT_EQ(slot_continuation_tokens(turn), 2539u);
  turn.block_size = 0;
  EXPECT_EQ(slot_continuation_tokens(turn), 157u * 16);
}

TEST(AnswerReuseFit, NoneUntilThreeTurnsThenTheirMedianShare) {
  AnswerReuseFit fit;
  EXPECT_EQ(fit.share(), 0);
  fit.observe(8, 32);
  fit.observe(16, 32);
  EXPECT_EQ(fit.share(), 0);
  fit.observe(64, 32);  // more than the answer (a longer history repeated): the whole answer
  EXPECT_EQ(fit.samples(), 3u);
  EXPECT_DOUBLE_EQ(fit.share(), 0.5);
  fit.observe(5, 0);  // no answer: no sample
  EXPECT_EQ(fit.samples(), 3u);
  for (int turn = 0; turn < 20; ++turn) {
    fit.observe(0, 32);
  }
  EXPECT_EQ(fit.samples(), AnswerReuseFit::kWindow);
  EXPECT_EQ(fit.share(), 0);
}

}  // namespace
}  // namespace kvgate::policy
