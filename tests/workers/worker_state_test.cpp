#include "kvgate/workers/worker_state.hpp"

#include <gtest/gtest.h>

namespace kvgate::workers {
namespace {

WorkerState make_worker() {
  return WorkerState("w0", "http://127.0.0.1:1", HttpUrl{{"127.0.0.1", 1}, "127.0.0.1:1"});
}

TEST(WorkerState, ActiveChecksMarkDownAndUpAfterThresholds) {
  auto worker = make_worker();
  HealthThresholds thresholds{3, 2, 5};
  EXPECT_TRUE(worker.healthy());
  EXPECT_EQ(worker.record_check(false, thresholds), HealthChange::none);
  EXPECT_EQ(worker.record_check(false, thresholds), HealthChange::none);
  EXPECT_EQ(worker.record_check(false, thresholds), HealthChange::went_down);
  EXPECT_FALSE(worker.healthy());
  EXPECT_EQ(worker.record_check(false, thresholds), HealthChange::none);
  EXPECT_EQ(worker.record_check(true, thresholds), HealthChange::none);
  EXPECT_EQ(worker.record_check(true, thresholds), HealthChange::went_up);
  EXPECT_TRUE(worker.healthy());
}

TEST(WorkerState, APassInTheMiddleResetsTheFailureStreak) {
  auto worker = make_worker();
  HealthThresholds thresholds{2, 1, 5};
  worker.record_check(false, thresholds);
  worker.record_check(true, thresholds);
  EXPECT_EQ(worker.record_check(false, thresholds), HealthChange::none);
  EXPECT_TRUE(worker.healthy());
}

TEST(WorkerState, PassiveFailuresMarkDownOnlyWhenEnabled) {
  auto worker = make_worker();
  HealthThresholds thresholds{3, 1, 2};
  EXPECT_EQ(worker.record_traffic(true, thresholds), HealthChange::none);
  EXPECT_EQ(worker.record_traffic(false, thresholds), HealthChange::none);
  EXPECT_EQ(worker.record_traffic(true, thresholds), HealthChange::none);
  EXPECT_EQ(worker.record_traffic(true, thresholds), HealthChange::went_down);
  EXPECT_FALSE(worker.healthy());

  auto never = make_worker();
  HealthThresholds disabled{3, 1, 0};
  for (int index = 0; index < 100; ++index) {
    never.record_traffic(true, disabled);
  }
  EXPECT_TRUE(never.healthy());
}

TEST(WorkerState, InFlightCountsDispatchAndCompletion) {
  auto worker = make_worker();
  worker.request_started();
  worker.request_started();
  worker.request_finished();
  EXPECT_EQ(worker.in_flight(), 1u);
}

}  // namespace
}  // namespace kvgate::workers
