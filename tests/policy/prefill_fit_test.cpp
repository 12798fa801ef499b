#include "kvgate/policy/prefill_fit.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

namespace kvgate::policy {
namespace {

// Synthetic engines: TTFT = a new + b (L^2 - cached^2) / 2 + c + d active
// + q queued (q below a: queued prompts are partly under way), with multiplicative noise, prompts of 200-24,000 tokens,
// a random cached head, a random queue and up to 300k tokens decoding beside, all from a fixed seed.
struct Engine {
  PrefillRates truth;
  double noise = 0.05;  // relative standard deviation

  PrefillSample sample(std::mt19937_64& random) const {
    std::uniform_int_distribution<std::uint32_t> length(200, 24'000);
    std::uniform_real_distribution<double> share(0, 1);
    PrefillSample sample;
    sample.input_tokens = length(random);
    sample.cached_tokens = share(random) < 0.5 ? 0 : static_cast<std::uint32_t>(share(random) * sample.input_tokens);
    sample.queued_tokens = share(random) < 0.7 ? 0 : static_cast<std::uint64_t>(share(random) * 8'000);
    sample.active_tokens = static_cast<std::uint64_t>(share(random) * 300'000);
    const double ttft = truth.prefill_ms(sample.input_tokens, sample.cached_tokens) +
                        truth.queue_ms(sample.queued_tokens, sample.active_tokens);
    std::normal_distribution<double> jitter(1, noise);
    sample.ttft_ms = ttft * std::max(0.5, jitter(random));
    return sample;
  }
};

PrefillFitOptions default_priors() {
  return {};  // 0.027 ms/token, 1.31e-6 ms/pair, 6 ms
}

// How far the learned model's cold-prompt prediction is from the truth, at
// the lengths a router compares (1k, 8k, 32k tokens), as a ratio - 1.
double worst_error(const PrefillRates& learned, const PrefillRates& truth) {
  double worst = 0;
  for (std::uint32_t length : {1'000u, 8'000u, 32'000u}) {
    worst = std::max(worst, std::abs(learned.prefill_ms(length, 0) / truth.prefill_ms(length, 0) - 1));
  }
  return worst;
}

TEST(PrefillFit, StartsFromThePriors) {
  PrefillFit fit(default_priors());
  auto rates = fit.rates();
  EXPECT_DOUBLE_EQ(rates.ms_per_token, 0.027);
  EXPECT_DOUBLE_EQ(rates.ms_per_token_pair, 1.31e-6);
  EXPECT_DOUBLE_EQ(rates.base_ms, 6);
  EXPECT_EQ(rates.samples, 0u);
}

TEST(PrefillFit, LearnsATwiceAsSlowWorkerWithinTwentyPercent) {
  std::mt19937_64 random(7);
  Engine slow{{0.054, 2.6e-6, 12, 0, 8e-5, 0.04}};
  PrefillFit fit(default_priors());
  for (int index = 0; index < 200; ++index) {
    fit.observe(slow.sample(random));
  }
  EXPECT_LT(worst_error(fit.rates(), slow.truth), 0.2) << fit.rates().ms_per_token;
  // The queue's and the decoding requests' shares are told apart from the
  // prefill's own speed.
  EXPECT_NEAR(fit.rates().ms_per_active_token, 8e-5, 2e-5);
  EXPECT_NEAR(fit.rates().ms_per_queued_token, 0.04, 0.01);
  EXPECT_EQ(fit.rates().samples, 200u);
}

TEST(PrefillFit, LearnsALargeAttentionTermWithinTwentyPercent) {
  std::mt19937_64 random(11);
  Engine attention{{0.027, 2e-5, 6, 0, 4e-5, 0.02}};  // a 32k prompt: 864 ms linear, 10.2 s of attention
  PrefillFit fit(default_priors());
  for (int index = 0; index < 200; ++index) {
    fit.observe(attention.sample(random));
  }
  EXPECT_LT(worst_error(fit.rates(), attention.truth), 0.2);
  EXPECT_NEAR(fit.rates().ms_per_token_pair, 2e-5, 0.4e-5);
}

TEST(PrefillFit, OutliersMoveItByABoundedStep) {
  std::mt19937_64 random(3);
  Engine engine{{0.03, 1.5e-6, 6, 0, 4e-5, 0.02}};
  PrefillFit fit(default_priors());
  for (int index = 0; index < 150; ++index) {
    fit.observe(engine.sample(random));
  }
  const auto before = fit.rates();
  const auto clipped_before = fit.clipped();
  // One request in ten stalled 20x (a preemption, a long decode batch).
  std::uint64_t clipped = 0;
  for (int index = 0; index < 100; ++index) {
    auto sample = engine.sample(random);
    if (index % 10 == 0) {
      sample.ttft_ms *= 20;
    }
    clipped += fit.observe(sample) == PrefillFit::Verdict::clipped ? 1 : 0;
  }
  EXPECT_GE(clipped, 10u);
  EXPECT_EQ(fit.clipped() - clipped_before, clipped);
  EXPECT_LT(worst_error(fit.rates(), engine.truth), 0.25);
  EXPECT_LT(worst_error(fit.rates(), before), 0.25);
}

TEST(PrefillFit, FollowsAWorkerWhoseSpeedChanges) {
  std::mt19937_64 random(5);
  Engine fast{{0.027, 1.31e-6, 6, 0, 4e-5, 0.02}};
  Engine throttled{{0.081, 3.9e-6, 18, 0, 1.2e-4, 0.06}};
  PrefillFit fit(default_priors());
  for (int index = 0; index < 200; ++index) {
    fit.observe(fast.sample(random));
  }
  EXPECT_LT(worst_error(fit.rates(), fast.truth), 0.2);
  for (int index = 0; index < 300; ++index) {
    fit.observe(throttled.sample(random));
  }
  EXPECT_LT(worst_error(fit.rates(), throttled.truth), 0.2);
}

TEST(PrefillFit, ImpossibleSamplesAreRejectedAndCoefficientsStayPositive) {
  PrefillFit fit(default_priors());
  EXPECT_EQ(fit.observe({0, 0, 0, 0, 10}), PrefillFit::Verdict::rejected);
  EXPECT_EQ(fit.observe({100, 200, 0, 0, 10}), PrefillFit::Verdict::rejected);  // more cached than the prompt
  EXPECT_EQ(fit.observe({100, 0, 0, 0, -1}), PrefillFit::Verdict::rejected);
  EXPECT_EQ(fit.observe({100, 0, 0, 0, std::nan("")}), PrefillFit::Verdict::rejected);
  EXPECT_EQ(fit.rates().samples, 0u);
  // An engine whose TTFT never depends on the prompt (everything cached
  // elsewhere, a proxy answering from memory): the per-token cost stays
  // above zero, or it would draw every request.
  for (std::uint32_t length = 100; length < 20'000; length += 100) {
    fit.observe({length, 0, 0, 0, 1});
  }
  auto rates = fit.rates();
  EXPECT_GT(rates.ms_per_token, 0);
  EXPECT_GE(rates.ms_per_token_pair, 0);
  EXPECT_GE(rates.base_ms, 0);
}

TEST(PrefillFit, AFixedPromptLengthLeavesThePriorsInPlaceOfWhatItCannotTell) {
  // Every request is a cold 2,000-token prompt: the samples cannot separate
  // the three terms, only their sum at 2,000 tokens. That sum is learned;
  // the covariance cap keeps the split near the priors instead of drifting.
  std::mt19937_64 random(9);
  PrefillFit fit(default_priors());
  std::normal_distribution<double> jitter(1, 0.05);
  const PrefillRates truth{0.054, 2.6e-6, 12, 0};
  for (int index = 0; index < 500; ++index) {
    fit.observe({2'000, 0, 0, 0, truth.prefill_ms(2'000, 0) * jitter(random)});
  }
  auto rates = fit.rates();
  EXPECT_NEAR(rates.prefill_ms(2'000, 0) / truth.prefill_ms(2'000, 0), 1, 0.05);
  EXPECT_NEAR(rates.ms_per_token_pair, 1.31e-6, 0.5e-6);  // the attention prior, untouched
  EXPECT_GT(rates.ms_per_token, 0.027);                   // the sum went mostly to the per-token term
}

TEST(SpeedFit, AWorkerTwiceAsSlowAsThePooledFitIsLearnedAsTwiceTheCost) {
  SpeedFit speed;
  EXPECT_DOUBLE_EQ(speed.speed(), 1);  // the fleet's own speed until told otherwise
  // Its first requests move it only part of the way (pulled towards 1).
  speed.observe(2);
  EXPECT_GT(speed.speed(), 1);
  EXPECT_LT(speed.speed(), 1.2);
  std::mt19937_64 random(3);
  std::lognormal_distribution<double> noisy(std::log(2.0), 0.3);
  for (int index = 0; index < 200; ++index) {
    speed.observe(noisy(random));
  }
  EXPECT_NEAR(speed.speed(), 2, 0.3);
  EXPECT_EQ(speed.samples(), 201u);
  // One request stalled 100x behind a long batch counts as 8x at most; a
  // ratio that is not a number counts not at all.
  const double before = speed.speed();
  speed.observe(100);
  EXPECT_GT(speed.speed(), before);
  EXPECT_LT(speed.speed(), before * 1.1);
  speed.observe(std::nan(""));
  speed.observe(-1);
  EXPECT_EQ(speed.samples(), 202u);
}

TEST(SpeedFit, ScalingTheRatesScalesEveryPrediction) {
  const PrefillRates rates{0.03, 1e-6, 5, 7, 4e-5, 0.02, 0.1};
  const PrefillSample sample{4'000, 1'000, 2'000, 50'000, 0};
  const auto twice = rates.scaled(2);
  EXPECT_DOUBLE_EQ(predicted_ttft_ms(twice, sample), 2 * predicted_ttft_ms(rates, sample));
  EXPECT_DOUBLE_EQ(predicted_ttft_ms(rates, sample), rates.queue_ms(2'000, 50'000) + rates.prefill_ms(4'000, 1'000));
  EXPECT_EQ(twice.samples, 7u);
  EXPECT_DOUBLE_EQ(twice.relative_noise, 0.1);
}

}  // namespace
}  // namespace kvgate::policy
