#include "kvgate/workers/scrape_schedule.hpp"

#include <gtest/gtest.h>

namespace kvgate::workers {
namespace {

TEST(ScrapeSchedule, OneScrapeAtATimeThenTheInterval) {
  ScrapeSchedule schedule;
  EXPECT_TRUE(schedule.due(0));
  schedule.started();
  EXPECT_FALSE(schedule.due(5'000));  // still being served: not asked again
  schedule.finished(true, 100, 1'000, 30'000);
  EXPECT_FALSE(schedule.due(1'099));
  EXPECT_TRUE(schedule.due(1'100));
}

TEST(ScrapeSchedule, FailuresBackOffUpToTheCapAndASuccessResets) {
  ScrapeSchedule schedule;
  std::uint64_t now = 0;
  std::vector<std::uint64_t> waits;
  for (int failure = 0; failure < 8; ++failure) {
    schedule.started();
    schedule.finished(false, now, 1'000, 10'000);
    waits.push_back(schedule.wait_ms(1'000, 10'000));
    EXPECT_FALSE(schedule.due(now + waits.back() - 1));
    EXPECT_TRUE(schedule.due(now + waits.back()));
    now += waits.back();
  }
  EXPECT_EQ(waits, (std::vector<std::uint64_t>{2'000, 4'000, 8'000, 10'000, 10'000, 10'000, 10'000, 10'000}));
  EXPECT_EQ(schedule.consecutive_failures(), 8u);
  schedule.started();
  schedule.finished(true, now, 1'000, 10'000);
  EXPECT_EQ(schedule.consecutive_failures(), 0u);
  EXPECT_TRUE(schedule.due(now + 1'000));
  // A cap below the interval never shortens the interval.
  ScrapeSchedule odd;
  odd.finished(false, 0, 5'000, 1'000);
  EXPECT_EQ(odd.wait_ms(5'000, 1'000), 5'000u);
}

}  // namespace
}  // namespace kvgate::workers
