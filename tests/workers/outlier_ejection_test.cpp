#include "kvgate/workers/outlier_ejection.hpp"

#include <gtest/gtest.h>

#include "kvgate/workers/retry_budget.hpp"

namespace kvgate::workers {
namespace {

constexpr EjectionOptions kOptions{3, 1'000, 5'000};

TEST(EjectionAllowed, TheCapCountsWholeWorkersAndNeverEmptiesAFleet) {
  EXPECT_FALSE(ejection_allowed(0, 1, 100));  // a lone worker stays
  EXPECT_TRUE(ejection_allowed(0, 2, 50));
  EXPECT_FALSE(ejection_allowed(1, 2, 50));
  EXPECT_TRUE(ejection_allowed(0, 3, 10));   // the first one always may go
  EXPECT_FALSE(ejection_allowed(1, 3, 50));  // two of three is 67%
  EXPECT_TRUE(ejection_allowed(1, 4, 50));
  EXPECT_FALSE(ejection_allowed(2, 4, 50));
  EXPECT_TRUE(ejection_allowed(2, 3, 100));
}

TEST(CircuitBreaker, OpensAfterConsecutiveFailuresOnly) {
  CircuitBreaker breaker;
  EXPECT_EQ(breaker.record(FailureCause::connect, 0, kOptions), CircuitBreaker::Change::none);
  EXPECT_EQ(breaker.record(FailureCause::connect, 1, kOptions), CircuitBreaker::Change::none);
  EXPECT_EQ(breaker.record(FailureCause::none, 2, kOptions), CircuitBreaker::Change::none);  // the streak restarts
  EXPECT_EQ(breaker.record(FailureCause::status_5xx, 3, kOptions), CircuitBreaker::Change::none);
  EXPECT_EQ(breaker.record(FailureCause::status_5xx, 4, kOptions), CircuitBreaker::Change::none);
  EXPECT_EQ(breaker.state(4), BreakerState::closed);
  EXPECT_EQ(breaker.record(FailureCause::timeout, 5, kOptions), CircuitBreaker::Change::ejected);
  EXPECT_EQ(breaker.state(5), BreakerState::open);
  EXPECT_EQ(breaker.open_until_ms(), 1'005u);
  EXPECT_EQ(breaker.last_cause(), FailureCause::timeout);
}

TEST(CircuitBreaker, AFailedProbeDoublesTheEjectionUpToTheCapAndASuccessForgetsThem) {
  CircuitBreaker breaker;
  for (int index = 0; index < 3; ++index) {
    breaker.record(FailureCause::reset, 0, kOptions);
  }
  ASSERT_EQ(breaker.open_until_ms(), 1'000u);
  // Answers to requests sent before the ejection change nothing.
  EXPECT_EQ(breaker.record(FailureCause::none, 500, kOptions), CircuitBreaker::Change::none);
  EXPECT_EQ(breaker.state(500), BreakerState::open);
  // Half-open: one failure is enough to go back out, for twice as long.
  EXPECT_EQ(breaker.state(1'000), BreakerState::half_open);
  EXPECT_EQ(breaker.record(FailureCause::reset, 1'000, kOptions), CircuitBreaker::Change::ejected);
  EXPECT_EQ(breaker.open_until_ms(), 3'000u);
  EXPECT_EQ(breaker.record(FailureCause::reset, 3'000, kOptions), CircuitBreaker::Change::ejected);
  EXPECT_EQ(breaker.open_until_ms(), 7'000u);
  EXPECT_EQ(breaker.record(FailureCause::reset, 7'000, kOptions), CircuitBreaker::Change::ejected);
  EXPECT_EQ(breaker.open_until_ms(), 12'000u);  // capped at 5 s
  EXPECT_EQ(breaker.ejections_in_a_row(), 4u);
  EXPECT_EQ(breaker.record(FailureCause::none, 12'000, kOptions), CircuitBreaker::Change::restored);
  EXPECT_EQ(breaker.state(12'000), BreakerState::closed);
  EXPECT_EQ(breaker.ejections_in_a_row(), 0u);
  // The next ejection starts from the base time again.
  for (int index = 0; index < 3; ++index) {
    breaker.record(FailureCause::connect, 20'000, kOptions);
  }
  EXPECT_EQ(breaker.open_until_ms(), 21'000u);
}

TEST(CircuitBreaker, TheCallersCapKeepsAFailingWorkerServing) {
  CircuitBreaker breaker;
  for (int index = 0; index < 10; ++index) {
    EXPECT_EQ(breaker.record(FailureCause::connect, 0, kOptions, false), CircuitBreaker::Change::none);
  }
  EXPECT_EQ(breaker.state(0), BreakerState::closed);
  EXPECT_EQ(breaker.failure_streak(), 10u);
  // Once the cap allows it, the next failure ejects.
  EXPECT_EQ(breaker.record(FailureCause::connect, 1, kOptions), CircuitBreaker::Change::ejected);
}

TEST(RetryBudget, AllowsTheFloorThenAShareOfRecentRequests) {
  RetryBudget budget;
  const config::RetryBudgetOptions options{0.2, 0.5};  // floor: 5 retries per 10 s
  for (int index = 0; index < 5; ++index) {
    EXPECT_TRUE(budget.try_retry(1'000, options)) << index;
  }
  EXPECT_FALSE(budget.try_retry(1'000, options));
  // 20 requests buy 4 more.
  for (int index = 0; index < 20; ++index) {
    budget.record_request(2'000);
  }
  int granted = 0;
  while (budget.try_retry(2'500, options)) {
    ++granted;
  }
  EXPECT_EQ(granted, 4);
}

TEST(RetryBudget, OnlyTheLastTenSecondsCount) {
  RetryBudget budget;
  const config::RetryBudgetOptions options{0.1, 0};
  for (int index = 0; index < 100; ++index) {
    budget.record_request(0);
  }
  int early = 0;
  while (budget.try_retry(500, options)) {
    ++early;
  }
  EXPECT_EQ(early, 10);
  // 10 s later neither those requests nor those retries count.
  EXPECT_FALSE(budget.try_retry(10'000, options));
  for (int index = 0; index < 30; ++index) {
    budget.record_request(10'100);
  }
  int later = 0;
  while (budget.try_retry(10'200, options)) {
    ++later;
  }
  EXPECT_EQ(later, 3);
}

}  // namespace
}  // namespace kvgate::workers
