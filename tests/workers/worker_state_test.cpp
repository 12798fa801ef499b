#include "kvgate/workers/worker_state.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <limits>
#include <thread>
#include <vector>

namespace kvgate::workers {
namespace {

WorkerState make_worker() {
  return WorkerState("w0", "http://127.0.0.1:1", HttpUrl{{"127.0.0.1", 1}, "127.0.0.1:1"});
}

TEST(WorkerState, ActiveChecksMarkDownAndUpAfterThresholds) {
  auto worker = make_worker();
  HealthThresholds thresholds{3, 2};
  EXPECT_TRUE(worker.health().healthy());
  EXPECT_EQ(worker.health().record_check(false, thresholds), HealthChange::none);
  EXPECT_EQ(worker.health().record_check(false, thresholds), HealthChange::none);
  EXPECT_EQ(worker.health().record_check(false, thresholds), HealthChange::went_down);
  EXPECT_FALSE(worker.health().healthy());
  EXPECT_EQ(worker.health().record_check(false, thresholds), HealthChange::none);
  EXPECT_EQ(worker.health().record_check(true, thresholds), HealthChange::none);
  EXPECT_EQ(worker.health().record_check(true, thresholds), HealthChange::went_up);
  EXPECT_TRUE(worker.health().healthy());
}

TEST(WorkerState, APassInTheMiddleResetsTheFailureStreak) {
  auto worker = make_worker();
  HealthThresholds thresholds{2, 1};
  worker.health().record_check(false, thresholds);
  worker.health().record_check(true, thresholds);
  EXPECT_EQ(worker.health().record_check(false, thresholds), HealthChange::none);
  EXPECT_TRUE(worker.health().healthy());
}

TEST(WorkerState, TrafficFailuresEjectThroughTheBreakerAndAProbeRestores) {
  auto worker = make_worker();
  EjectionOptions options{2, 1'000, 8'000};
  EXPECT_EQ(worker.breaker().record_traffic(FailureCause::connect, 100, options), CircuitBreaker::Change::none);
  EXPECT_EQ(worker.breaker().record_traffic(FailureCause::none, 110, options), CircuitBreaker::Change::none);
  EXPECT_EQ(worker.breaker().record_traffic(FailureCause::status_5xx, 120, options), CircuitBreaker::Change::none);
  EXPECT_EQ(worker.breaker().record_traffic(FailureCause::reset, 130, options), CircuitBreaker::Change::ejected);
  EXPECT_TRUE(worker.breaker().ejected(131));
  EXPECT_TRUE(worker.health().healthy());  // ejection is not the active checks' verdict
  auto status = worker.breaker().status(131);
  EXPECT_EQ(status.state, BreakerState::open);
  EXPECT_EQ(status.ejected_until_ms, 1'130u);
  EXPECT_EQ(status.last_cause, FailureCause::reset);
  EXPECT_EQ(status.ejections_total, 1u);
  EXPECT_FALSE(worker.breaker().ejected(1'130));  // half-open: takes traffic again
  EXPECT_EQ(worker.breaker().record_traffic(FailureCause::none, 1'200, options), CircuitBreaker::Change::restored);
  EXPECT_EQ(worker.breaker().status(1'200).state, BreakerState::closed);

  auto never = make_worker();
  for (int index = 0; index < 100; ++index) {
    never.breaker().record_traffic(FailureCause::connect, 100, {0, 1'000, 8'000});
  }
  EXPECT_FALSE(never.breaker().ejected(101));
}

TEST(WorkerState, InFlightCountsDispatchAndCompletion) {
  auto worker = make_worker();
  worker.load().request_started();
  worker.load().request_started();
  worker.load().request_finished();
  EXPECT_EQ(worker.load().in_flight(), 1u);
}

// The router's recent dispatches to a worker, per ms: a steady stream is
// measured at its rate, and silence decays it.
TEST(WorkerState, RecentTrafficFollowsTheDispatchesAndFadesWithoutThem) {
  auto worker = make_worker();
  EXPECT_EQ(worker.load().recent_traffic(1'000).arrivals_per_ms, 0);
  // 20 requests a second, 25 ms of priced prefill each, for a minute.
  std::uint64_t now = 1'000;
  for (int request = 0; request < 1'200; ++request, now += 50) {
    worker.load().record_traffic(25, now);
  }
  now -= 50;  // the last dispatch's time
  const auto steady = worker.load().recent_traffic(now);
  EXPECT_NEAR(steady.arrivals_per_ms * 1'000, 20, 1);
  EXPECT_NEAR(steady.utilisation, 0.5, 0.03);
  // Ten windows of silence: next to nothing left.
  const auto later =
      worker.load().recent_traffic(now + 10 * static_cast<std::uint64_t>(LoadCounters::kTrafficWindowMs));
  EXPECT_LT(later.arrivals_per_ms * 1'000, 0.01);
  // A time before the last dispatch (another thread's clock read) and
  // prices that are not numbers change nothing for the worse.
  EXPECT_DOUBLE_EQ(worker.load().recent_traffic(now - 5'000).utilisation, steady.utilisation);
  worker.load().record_traffic(std::numeric_limits<double>::quiet_NaN(), now);
  worker.load().record_traffic(-5, now);
  EXPECT_TRUE(std::isfinite(worker.load().recent_traffic(now).utilisation));
  EXPECT_NEAR(worker.load().recent_traffic(now).utilisation, steady.utilisation, 1e-9);
}

TEST(WorkerState, RecentTimeToFirstTokenFollowsTheLastAnswers) {
  auto worker = make_worker();
  EXPECT_FALSE(worker.load().recent_time_to_first_token_seconds());
  worker.load().record_time_to_first_token(0.1);
  EXPECT_DOUBLE_EQ(*worker.load().recent_time_to_first_token_seconds(), 0.1);
  // A queue builds up: within ten answers the mean is most of the way there.
  for (int answer = 0; answer < 10; ++answer) {
    worker.load().record_time_to_first_token(1.0);
  }
  EXPECT_GT(*worker.load().recent_time_to_first_token_seconds(), 0.85);
  EXPECT_LT(*worker.load().recent_time_to_first_token_seconds(), 1.0);
}

TEST(WorkerState, AStreamsPrefillIsPendingUntilItsFirstToken) {
  auto worker = make_worker();
  {
    InFlightRequest request(worker, 500);
    EXPECT_EQ(worker.load().pending_prefill_tokens(), 500u);
    request.first_token(0.25);
    EXPECT_EQ(worker.load().pending_prefill_tokens(), 0u);
    EXPECT_EQ(worker.load().in_flight(), 1u);
  }
  EXPECT_EQ(worker.load().in_flight(), 0u);
  EXPECT_DOUBLE_EQ(*worker.load().recent_time_to_first_token_seconds(), 0.25);
}

// The pending request count (the gateway's own share of the engine's
// waiting requests) follows the same life, also for a fully cached prompt
// and through a move; the mean uncached size follows the dispatches.
TEST(WorkerState, PendingRequestsCountEveryRequestUntilItAnswersOnce) {
  auto worker = make_worker();
  {
    InFlightRequest cached(worker, 0, 800);
    InFlightRequest fresh(worker, 1'000, 1'000);
    EXPECT_EQ(worker.load().pending_requests(), 2u);
    InFlightRequest moved(std::move(fresh));
    EXPECT_EQ(worker.load().pending_requests(), 2u);
    moved.answering();
    moved.answering();
    EXPECT_EQ(worker.load().pending_requests(), 1u);
    EXPECT_EQ(worker.load().pending_prefill_tokens(), 0u);
  }
  EXPECT_EQ(worker.load().pending_requests(), 0u);
  EXPECT_DOUBLE_EQ(worker.load().mean_uncached_tokens(), 50.0);  // 0, then 5% of the way to 1,000
}

// The engine's waiting requests beyond the gateway's own pending ones at
// the scrape are other gateways' load; a scrape without the figure clears it.
TEST(WorkerState, TheEnginesWaitingRequestsBeyondOurOwnAreOthers) {
  auto worker = make_worker();
  auto load = std::make_shared<EngineView::Scrape>();
  load->load.waiting = 7;
  load->scraped_ms = 1'000;
  worker.engine().publish(load, 3);
  EXPECT_EQ(worker.engine().queue().waiting, 7u);
  EXPECT_EQ(worker.engine().queue().others_waiting, 4u);
  worker.engine().publish(load, 9);  // ours are more than the engine shows: none are others'
  EXPECT_EQ(worker.engine().queue().others_waiting, 0u);
  auto without = std::make_shared<EngineView::Scrape>();
  worker.engine().publish(load, 0);
  worker.engine().publish(without, 0);
  EXPECT_FALSE(worker.engine().queue().waiting);
  EXPECT_EQ(worker.engine().queue().others_waiting, 0u);
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
        worker.costs().record_prediction(256, 0, 0, options);
        seen_drifting += worker.costs().drifting() ? 1 : 0;
        (void)worker.costs().drift_evidence();
      }
    });
  }
  for (auto& thread : threads) {
    thread.join();
  }
  EXPECT_TRUE(worker.costs().drifting());
  EXPECT_GT(seen_drifting.load(), 0);
  EXPECT_EQ(worker.costs().drift_evidence().samples, options.window);
}

// I/O threads record traffic outcomes and prefill samples while routers
// read the ejection and the rates lock-free (the ThreadSanitizer stage runs
// this).
TEST(WorkerState, OutcomesAndPrefillSamplesFromSeveralThreadsWhileTheRouterReads) {
  WorkerState worker("w0", "http://127.0.0.1:1", HttpUrl{{"127.0.0.1", 1}, "127.0.0.1:1"});
  const EjectionOptions ejection{3, 50, 400};
  std::atomic<std::uint64_t> clock{0};
  std::atomic<bool> done{false};
  std::atomic<int> ejected_reads{0};
  std::atomic<int> bad_rates{0};
  std::thread router([&] {
    while (!done.load()) {
      ejected_reads += worker.breaker().ejected(clock.load()) ? 1 : 0;
      const auto rates = worker.costs().prefill_rates();
      bad_rates += rates.ms_per_token > 0 && rates.ms_per_token_pair >= 0 && rates.base_ms >= 0 ? 0 : 1;
      bad_rates += worker.costs().prefill_speed() > 0 ? 0 : 1;
      (void)worker.breaker().status(clock.load());
    }
  });
  std::vector<std::thread> io_threads;
  for (int thread = 0; thread < 2; ++thread) {
    io_threads.emplace_back([&, thread] {
      for (std::uint32_t request = 0; request < 3'000; ++request) {
        const auto now = clock.fetch_add(1);
        // Bursts of failures on one thread, successes on the other.
        const auto failure = thread == 0 && request % 10 < 4 ? FailureCause::reset : FailureCause::none;
        worker.breaker().record_traffic(failure, now, ejection);
        worker.costs().record_prefill({1'000 + request, 0, 0, 0, 30.0 + request % 7});
        worker.costs().record_prefill_speed(thread == 0 ? 1.5 : 2.5);
      }
    });
  }
  for (auto& thread : io_threads) {
    thread.join();
  }
  done = true;
  router.join();
  EXPECT_EQ(bad_rates.load(), 0);
  EXPECT_GT(worker.breaker().status(clock.load()).ejections_total, 0u);
  EXPECT_EQ(worker.costs().prefill_rates().samples, 6'000u);
  EXPECT_EQ(worker.costs().prefill_speed_fit().samples(), 6'000u);
  EXPECT_GT(worker.costs().prefill_speed(), 1.4);  // between the two threads' ratios
  EXPECT_LT(worker.costs().prefill_speed(), 2.6);
}

// Each part of a worker's state has one kind of writer; these run each
// writer on its threads against a reader that reads as the router does
// (the ThreadSanitizer stage runs them).

// load(): the I/O threads dispatch and answer requests.
TEST(WorkerStateWriters, LoadCountersFromSeveralIoThreadsWhileTheRouterReads) {
  auto worker = make_worker();
  std::atomic<bool> done{false};
  std::atomic<int> reads{0};
  std::thread router([&] {
    do {  // at least once, however the threads are scheduled
      const auto& load = worker.load();
      reads += static_cast<int>(load.in_flight() + load.pending_requests() > 1'000'000 ? 0 : 1);
      (void)load.pending_prefill_tokens();
      (void)load.active_tokens();
      (void)load.mean_uncached_tokens();
      (void)load.recent_time_to_first_token_seconds();
      (void)load.recent_traffic(1'000);
    } while (!done.load());
  });
  std::vector<std::thread> io_threads;
  for (int thread = 0; thread < 3; ++thread) {
    io_threads.emplace_back([&] {
      for (int request = 0; request < 2'000; ++request) {
        InFlightRequest in_flight(worker, 100, 400);
        worker.load().record_traffic(10, static_cast<std::uint64_t>(request));
        if (request % 2 == 0) {
          in_flight.first_token(0.01);
        }
      }
    });
  }
  for (auto& thread : io_threads) {
    thread.join();
  }
  done = true;
  router.join();
  EXPECT_GT(reads.load(), 0);
  EXPECT_EQ(worker.load().in_flight(), 0u);
  EXPECT_EQ(worker.load().pending_prefill_tokens(), 0u);
  EXPECT_EQ(worker.load().pending_requests(), 0u);
  EXPECT_EQ(worker.load().active_tokens(), 0u);
  EXPECT_TRUE(worker.load().recent_time_to_first_token_seconds());
}

// health() and engine(): the control thread checks and scrapes.
TEST(WorkerStateWriters, ChecksAndScrapesFromTheControlThreadWhileRoutersRead) {
  auto worker = make_worker();
  std::atomic<bool> done{false};
  std::atomic<int> torn{0};
  std::vector<std::thread> routers;
  for (int thread = 0; thread < 2; ++thread) {
    routers.emplace_back([&] {
      while (!done.load()) {
        (void)worker.health().healthy();
        // The per-decision fields may come from two successive scrapes.
        (void)worker.engine().queue();
        // A snapshot's fields agree with each other: scraped at 10x its waiting.
        if (auto last = worker.engine().last();
            last && last->load.waiting && last->scraped_ms != static_cast<std::uint64_t>(*last->load.waiting) * 10) {
          ++torn;
        }
      }
    });
  }
  std::thread control([&] {
    const HealthThresholds thresholds{2, 2};
    for (std::uint32_t round = 1; round <= 3'000; ++round) {
      worker.health().record_check(round % 7 != 0, thresholds);
      auto scrape = std::make_shared<EngineView::Scrape>();
      scrape->load.waiting = round % 50;
      scrape->scraped_ms = static_cast<std::uint64_t>(round % 50) * 10;
      worker.engine().publish(std::move(scrape), round % 3);
    }
  });
  control.join();
  done = true;
  for (auto& thread : routers) {
    thread.join();
  }
  EXPECT_EQ(torn.load(), 0);
  EXPECT_TRUE(worker.engine().last());
}

// The router reads the ages only for a worker where the prompt's blocks do
// not fit in the free room: anywhere else eviction_cost() returns before it
// looks at them, so they are left unread.
TEST(EventStreamStatus, TheAgesAreReadOnlyWhereAPlacementCouldEvict) {
  EventStreamStatus stream;
  stream.gpu_blocks = 90;
  stream.capacity_blocks = 100;
  stream.gpu_block_ages[3] = 60;
  stream.gpu_block_ages[7] = 30;
  stream.gpu_block_ages_ms = 1'000;
  const auto fits = stream.lru_profile(1'500, 10);
  EXPECT_EQ(fits.held_blocks, 90u);
  EXPECT_EQ(fits.capacity_blocks, 100u);
  EXPECT_EQ(fits.blocks, policy::AgeHistogram{});
  const auto evicts = stream.lru_profile(1'500, 11);
  EXPECT_EQ(evicts.blocks[3], 60u);
  EXPECT_EQ(evicts.blocks[7], 30u);
  EXPECT_DOUBLE_EQ(evicts.age_offset_ms, 500);
  EXPECT_EQ(stream.lru_profile(1'500).blocks[7], 30u) << "without a bound, the ages are always read";
  EXPECT_EQ(stream.lru_profile(1'500, UINT64_MAX - 5).blocks[3], 60u) << "no overflow in the room check";
  stream.capacity_blocks = 0;  // unknown capacity: no eviction term at all
  EXPECT_EQ(stream.lru_profile(1'500, 1'000).blocks, policy::AgeHistogram{});
  EXPECT_EQ(stream.lru_profile(1'500).blocks[3], 60u) << "/debug/workers shows them still";
}

}  // namespace
}  // namespace kvgate::workers
