#include "kvgate/workers/ttft_calibration.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <thread>
#include <vector>

namespace kvgate::workers {
namespace {

TEST(TtftCalibration, SummarisesRealizedOverExpected) {
  TtftCalibration calibration;
  EXPECT_EQ(calibration.summary().samples, 0u);
  // Ratios 0.5, 1, 1, 2, ... : ten answers, nine of them on time, one twice as slow.
  calibration.record(100, 50);
  for (int at = 0; at < 8; ++at) {
    calibration.record(100, 100);
  }
  calibration.record(100, 200);
  const auto summary = calibration.summary();
  EXPECT_EQ(summary.samples, 10u);
  EXPECT_DOUBLE_EQ(summary.ratio_p50, 1.0);
  EXPECT_DOUBLE_EQ(summary.ratio_p90, 1.0);  // nearest rank: the 9th of 10
  EXPECT_DOUBLE_EQ(summary.relative_error_p50, 0.0);
  calibration.record(100, 300);
  EXPECT_DOUBLE_EQ(calibration.summary().ratio_p90, 2.0);
}

// What cannot be observed is not a sample: nothing divides by zero.
TEST(TtftCalibration, IgnoresWhatItCannotObserve) {
  TtftCalibration calibration;
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  for (auto [expected, realized] : {std::pair{0.0, 10.0}, std::pair{-1.0, 10.0}, std::pair{10.0, 0.0},
                                    std::pair{nan, 10.0}, std::pair{10.0, inf}, std::pair{10.0, -3.0}}) {
    calibration.record(expected, realized);
  }
  EXPECT_EQ(calibration.summary().samples, 0u);
  EXPECT_EQ(calibration.recorded(), 0u);
}

// The window keeps the last kWindow samples: old behaviour leaves it.
TEST(TtftCalibration, TheWindowForgetsTheOldest) {
  TtftCalibration calibration;
  for (std::uint32_t at = 0; at < TtftCalibration::kWindow; ++at) {
    calibration.record(100, 400);  // four times slower than expected
  }
  EXPECT_DOUBLE_EQ(calibration.summary().ratio_p50, 4.0);
  EXPECT_DOUBLE_EQ(calibration.summary().relative_error_p50, 0.75);
  for (std::uint32_t at = 0; at < TtftCalibration::kWindow; ++at) {
    calibration.record(100, 110);
  }
  const auto summary = calibration.summary();
  EXPECT_EQ(summary.samples, TtftCalibration::kWindow);
  EXPECT_NEAR(summary.ratio_p50, 1.1, 1e-6);
  EXPECT_NEAR(summary.relative_error_p50, 0.1 / 1.1, 1e-6);
}

// Persistently off is named with what the worker's own samples point to:
// requests sent while it was busy far slower than idle ones is a queue
// priced short; both kinds off alike is a price of its prefill.
TEST(TtftCalibration, NamesAPersistentMiscalibrationAndItsLikelyCause) {
  TtftCalibration within;
  for (std::uint32_t at = 0; at < TtftCalibration::kMinSamples; ++at) {
    within.record(100, 150, at % 2 == 0);
  }
  EXPECT_EQ(likely_ttft_miscalibration(within.summary()), "");

  TtftCalibration too_few;
  for (std::uint32_t at = 0; at + 1 < TtftCalibration::kMinSamples; ++at) {
    too_few.record(100, 900, true);
  }
  EXPECT_EQ(likely_ttft_miscalibration(too_few.summary()), "");

  TtftCalibration queued;
  for (std::uint32_t at = 0; at < 40; ++at) {
    const bool busy = at % 4 != 0;  // 30 busy, 10 idle
    queued.record(100, busy ? 500 : 110, busy);
  }
  const auto queued_summary = queued.summary();
  EXPECT_EQ(queued_summary.busy_samples, 30u);
  EXPECT_DOUBLE_EQ(queued_summary.busy_ratio_p50, 5.0);
  EXPECT_NEAR(queued_summary.idle_ratio_p50, 1.1, 1e-6);
  const auto queue_cause = likely_ttft_miscalibration(queued_summary);
  EXPECT_NE(queue_cause.find("busy took 5.00x"), std::string::npos) << queue_cause;
  EXPECT_NE(queue_cause.find("idle ones 1.10x"), std::string::npos) << queue_cause;

  TtftCalibration slow;
  for (std::uint32_t at = 0; at < 40; ++at) {
    slow.record(100, 300, at % 2 == 0);
  }
  const auto prefill_cause = likely_ttft_miscalibration(slow.summary());
  EXPECT_NE(prefill_cause.find("3.00x the expected, idle and busy alike"), std::string::npos) << prefill_cause;

  TtftCalibration fast;
  for (std::uint32_t at = 0; at < 40; ++at) {
    fast.record(100, 20);
  }
  EXPECT_NE(likely_ttft_miscalibration(fast.summary()).find("0.20x"), std::string::npos);
}

// Writers on several threads and a reader at once (run under TSan too):
// every summary is of whole samples.
TEST(TtftCalibration, ThreadsRecordWhileOneReads) {
  TtftCalibration calibration;
  std::vector<std::thread> writers;
  for (int thread = 0; thread < 4; ++thread) {
    writers.emplace_back([&] {
      for (int at = 0; at < 5000; ++at) {
        calibration.record(50, 100);
      }
    });
  }
  for (int read = 0; read < 200; ++read) {
    const auto summary = calibration.summary();
    if (summary.samples > 0) {
      EXPECT_DOUBLE_EQ(summary.ratio_p50, 2.0);
    }
  }
  for (auto& writer : writers) {
    writer.join();
  }
  EXPECT_EQ(calibration.recorded(), 20'000u);
  EXPECT_EQ(calibration.summary().samples, TtftCalibration::kWindow);
}

}  // namespace
}  // namespace kvgate::workers
