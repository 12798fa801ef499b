#include "kvgate/workers/worker_state.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

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

TEST(WorkerState, RecentTimeToFirstTokenFollowsTheLastAnswers) {
  auto worker = make_worker();
  EXPECT_FALSE(worker.recent_time_to_first_token_seconds());
  worker.record_time_to_first_token(0.1);
  EXPECT_DOUBLE_EQ(*worker.recent_time_to_first_token_seconds(), 0.1);
  // A queue builds up: within ten answers the mean is most of the way there.
  for (int answer = 0; answer < 10; ++answer) {
    worker.record_time_to_first_token(1.0);
  }
  EXPECT_GT(*worker.recent_time_to_first_token_seconds(), 0.85);
  EXPECT_LT(*worker.recent_time_to_first_token_seconds(), 1.0);
}

TEST(WorkerState, AStreamsPrefillIsPendingUntilItsFirstToken) {
  auto worker = make_worker();
  {
    InFlightRequest request(worker, 500);
    EXPECT_EQ(worker.pending_prefill_tokens(), 500u);
    request.first_token(0.25);
    EXPECT_EQ(worker.pending_prefill_tokens(), 0u);
    EXPECT_EQ(worker.in_flight(), 1u);
  }
  EXPECT_EQ(worker.in_flight(), 0u);
  EXPECT_DOUBLE_EQ(*worker.recent_time_to_first_token_seconds(), 0.25);
}

}  // namespace
}  // namespace kvgate::workers

namespace kvgate::workers {
namespace {

// I/O threads record predictions while routers read the drift flag (the
// ThreadSanitizer stage runs this).
TEST(WorkerState, PredictionsRecordedFromSeveralThreadsWhileTheRouterReads) {
  WorkerState worker("w0", "http://127.0.0.1:1", HttpUrl{{"127.0.0.1", 1}, "127.0.0.1:1"});
  DriftOptions options;
  std::atomic<int> seen_drifting{0};
  std::vector<std::thread> threads;
  for (int thread = 0; thread < 3; ++thread) {
    threads.emplace_back([&] {
      for (int sample = 0; sample < 2'000; ++sample) {
        worker.record_prediction(256, 0, options);
        seen_drifting += worker.drifting() ? 1 : 0;
        (void)worker.drift_evidence();
      }
    });
  }
  for (auto& thread : threads) {
    thread.join();
  }
  EXPECT_TRUE(worker.drifting());
  EXPECT_GT(seen_drifting.load(), 0);
  EXPECT_EQ(worker.drift_evidence().samples, options.window);
}

}  // namespace
}  // namespace kvgate::workers
