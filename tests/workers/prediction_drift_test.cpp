#include <gtest/gtest.h>

#include "kvgate/workers/prediction_drift.hpp"

namespace kvgate::workers {
namespace {

DriftOptions options() {
  DriftOptions options;
  options.window = 16;
  options.min_samples = 8;
  options.trip_share = 0.5;
  options.recover_share = 0.25;
  return options;
}

TEST(PredictionDrift, PersistentOverPredictionTripsAfterTheMinimumSamples) {
  PredictionDrift drift;
  for (int sample = 0; sample < 7; ++sample) {
    EXPECT_EQ(drift.record(512, 0, 0, options()), DriftChange::none) << sample;
  }
  EXPECT_EQ(drift.record(512, 0, 0, options()), DriftChange::started);
  EXPECT_TRUE(drift.drifting());
  auto evidence = drift.evidence();
  EXPECT_EQ(evidence.samples, 8u);
  EXPECT_EQ(evidence.over_predicted, 8u);
  EXPECT_EQ(evidence.predicted_tokens, 8u * 512);
  EXPECT_EQ(evidence.reported_tokens, 0u);
  EXPECT_EQ(drift.record(512, 0, 0, options()), DriftChange::none);  // reported once
}

TEST(PredictionDrift, OccasionalOverPredictionUnderKvPressureDoesNotTrip) {
  // An engine under KV pressure sometimes evicts a block between the
  // decision and the prefill: one over-prediction in five.
  PredictionDrift drift;
  for (int sample = 0; sample < 200; ++sample) {
    const bool raced = sample % 5 == 0;
    EXPECT_EQ(drift.record(320, raced ? 304 : 320, 0, options()), DriftChange::none) << sample;
  }
  EXPECT_FALSE(drift.drifting());
}

// Several gateways under heavy KV pressure: another gateway's request took
// the worker's blocks between this decision and its prefill, on most
// samples. The engine's eviction events explain each miss, so the index is
// still trusted; a miss larger than what was evicted is still evidence.
TEST(PredictionDrift, OverPredictionsTheEnginesEvictionsExplainAreNotDrift) {
  PredictionDrift drift;
  for (int sample = 0; sample < 100; ++sample) {
    const bool raced = sample % 4 != 0;
    EXPECT_EQ(drift.record(30'000, raced ? 2'000 : 30'000, raced ? 29'000 : 0, options()), DriftChange::none) << sample;
  }
  EXPECT_FALSE(drift.drifting());
  EXPECT_EQ(drift.evidence().over_predicted, 0u);
  // Evictions that cover only part of each miss explain none of it.
  for (int sample = 0; sample < 7; ++sample) {
    EXPECT_EQ(drift.record(30'000, 2'000, 27'999, options()), DriftChange::none) << sample;
  }
  EXPECT_EQ(drift.record(30'000, 2'000, 27'999, options()), DriftChange::started);
}

TEST(PredictionDrift, UnderPredictionIsNotDrift) {
  PredictionDrift drift;
  for (int sample = 0; sample < 50; ++sample) {
    drift.record(0, 256, 0, options());  // e.g. another gateway warmed the worker
    drift.record(128, 256, 0, options());
  }
  EXPECT_FALSE(drift.drifting());
}

TEST(PredictionDrift, SamplesWhereNeitherSideClaimsAHitAreSkipped) {
  PredictionDrift drift;
  for (int sample = 0; sample < 100; ++sample) {
    drift.record(0, 0, 0, options());
  }
  EXPECT_EQ(drift.evidence().samples, 0u);
  for (int sample = 0; sample < 8; ++sample) {
    drift.record(64, 0, 0, options());
  }
  EXPECT_TRUE(drift.drifting());
}

TEST(PredictionDrift, RecoversOnceTheWindowAgreesAgainWithHysteresis) {
  PredictionDrift drift;
  for (int sample = 0; sample < 16; ++sample) {
    drift.record(512, 0, 0, options());
  }
  ASSERT_TRUE(drift.drifting());
  // 16 in the window: it takes the over share down to 4 of 16 (0.25).
  int agreeing = 0;
  while (drift.record(256, 256, 0, options()) != DriftChange::ended) {
    ++agreeing;
    ASSERT_LT(agreeing, 16);
    EXPECT_TRUE(drift.drifting());
  }
  EXPECT_EQ(agreeing + 1, 12);
  EXPECT_FALSE(drift.drifting());
  // Between the two thresholds nothing changes.
  for (int sample = 0; sample < 3; ++sample) {
    EXPECT_EQ(drift.record(512, 0, 0, options()), DriftChange::none);
  }
  EXPECT_FALSE(drift.drifting());
}

TEST(PredictionDrift, DisabledClearsTheState) {
  PredictionDrift drift;
  for (int sample = 0; sample < 8; ++sample) {
    drift.record(512, 0, 0, options());
  }
  ASSERT_TRUE(drift.drifting());
  auto off = options();
  off.enabled = false;
  EXPECT_EQ(drift.record(512, 0, 0, off), DriftChange::ended);
  EXPECT_FALSE(drift.drifting());
  EXPECT_EQ(drift.evidence().samples, 0u);
}

TEST(PredictionDrift, AWindowShrunkOnReloadKeepsTheNewestSamples) {
  PredictionDrift drift;
  auto wide = options();
  wide.window = 32;
  for (int sample = 0; sample < 24; ++sample) {
    drift.record(100, 100, 0, wide);  // agreeing, oldest
  }
  for (int sample = 0; sample < 8; ++sample) {
    drift.record(100, 0, 0, wide);  // over, newest
  }
  EXPECT_FALSE(drift.drifting());
  auto narrow = options();
  narrow.window = 8;
  EXPECT_EQ(drift.record(100, 0, 0, narrow), DriftChange::started);
  EXPECT_EQ(drift.evidence().samples, 8u);
}

}  // namespace
}  // namespace kvgate::workers
