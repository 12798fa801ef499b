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
