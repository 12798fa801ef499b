#include "kvgate/workers/learned_transfer.hpp"

#include <gtest/gtest.h>

namespace kvgate::workers {
namespace {

TEST(LearnedTransfer, ThePriorStandsUntilEnoughHandOversAndThenTheirMean) {
  LearnedTransfer transfer;
  constexpr double kPrior = 0.005;  // ms per token
  for (std::uint32_t sample = 0; sample + 1 < LearnedTransfer::kMinSamples; ++sample) {
    transfer.observe(2'000, 40);  // 0.02 ms per token
  }
  EXPECT_EQ(transfer.ms_per_token(kPrior), kPrior);
  transfer.observe(2'000, 40);
  EXPECT_NEAR(transfer.ms_per_token(kPrior), 0.02, 1e-9);
  EXPECT_EQ(transfer.samples(), LearnedTransfer::kMinSamples);
  // A slower link pulls the mean toward it, a sample at a time.
  for (int sample = 0; sample < 100; ++sample) {
    transfer.observe(2'000, 80);
  }
  EXPECT_NEAR(transfer.ms_per_token(kPrior), 0.04, 1e-4);
}

TEST(LearnedTransfer, ShortHandOversAndNonsenseTeachNothing) {
  LearnedTransfer transfer;
  for (std::uint32_t sample = 0; sample < 2 * LearnedTransfer::kMinSamples; ++sample) {
    transfer.observe(LearnedTransfer::kMinTokens - 1, 500);  // the decoder's first step, not the link
    transfer.observe(4'000, -3);                             // the first token before the prefill's answer
  }
  EXPECT_EQ(transfer.samples(), 0u);
  EXPECT_EQ(transfer.ms_per_token(0.005), 0.005);
}

}  // namespace
}  // namespace kvgate::workers
