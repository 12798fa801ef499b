#include "kvgate/workers/learned_adapter_load.hpp"

#include <gtest/gtest.h>

#include <random>

namespace kvgate::workers {
namespace {

TEST(LearnedAdapterLoad, ThePriorStandsUntilBothKindsHaveSamples) {
  LearnedAdapterLoad load;
  EXPECT_EQ(load.load_ms(100), 100);
  for (std::uint32_t sample = 0; sample < LearnedAdapterLoad::kMinSamples; ++sample) {
    load.observe(true, 40);
  }
  EXPECT_EQ(load.load_ms(100), 100);  // nothing to tell the cost model's own error from
  for (std::uint32_t sample = 0; sample + 1 < LearnedAdapterLoad::kMinSamples; ++sample) {
    load.observe(false, 5);
  }
  EXPECT_EQ(load.load_ms(100), 100);
  load.observe(false, 5);
  EXPECT_DOUBLE_EQ(load.load_ms(100), 35);
  EXPECT_EQ(load.status().loaded_samples, LearnedAdapterLoad::kMinSamples);
}

// The cost model's error (here: every request 12 ms later than expected,
// with noise) is taken out; what remains is the load.
TEST(LearnedAdapterLoad, LearnsTheLoadBeyondTheCostModelsOwnError) {
  LearnedAdapterLoad load;
  std::mt19937 random(7);
  std::normal_distribution<double> noise(0, 4);
  for (int sample = 0; sample < 400; ++sample) {
    const bool loaded = sample % 3 == 0;
    // The decision priced 100 ms; the engine took 25 ms to load.
    load.observe(loaded, 12 + noise(random) + (loaded ? 25 - 100 + 100 : 0));
  }
  EXPECT_NEAR(load.load_ms(100), 25, 3);
}

TEST(LearnedAdapterLoad, ANegativeOrAbsurdExcessIsClamped) {
  LearnedAdapterLoad load;
  for (std::uint32_t sample = 0; sample < LearnedAdapterLoad::kMinSamples; ++sample) {
    load.observe(true, 0);
    load.observe(false, 50);
  }
  EXPECT_EQ(load.load_ms(100), 0);
  LearnedAdapterLoad slow;
  for (std::uint32_t sample = 0; sample < LearnedAdapterLoad::kMinSamples; ++sample) {
    slow.observe(true, 1e9);
    slow.observe(false, 0);
  }
  EXPECT_EQ(slow.load_ms(100), LearnedAdapterLoad::kMaxLoadMs);
}

}  // namespace
}  // namespace kvgate::workers
