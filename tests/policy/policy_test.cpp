#include <gtest/gtest.h>

#include <limits>
#include <map>
#include <set>
#include <type_traits>

#include "kvgate/policy/policy.hpp"

namespace kvgate::policy {
namespace {

std::vector<WorkerView> three_workers() {
  return {{"a", true, 0}, {"b", true, 0}, {"c", true, 0}};
}

TEST(RoundRobin, RotatesBySequence) {
  auto policy = make_round_robin();
  auto workers = three_workers();
  std::vector<std::string> picked;
  for (std::uint64_t sequence = 0; sequence < 6; ++sequence) {
    auto decision = policy->decide({"m", std::nullopt, sequence, {}}, workers);
    ASSERT_TRUE(decision.worker_index);
    picked.push_back(std::string(workers[*decision.worker_index].id));
    EXPECT_EQ(decision.reason, Reason::round_robin);
  }
  EXPECT_EQ(picked, (std::vector<std::string>{"a", "b", "c", "a", "b", "c"}));
}

TEST(RoundRobin, SkipsUnhealthyAndTriedWorkers) {
  auto policy = make_round_robin();
  auto workers = three_workers();
  workers[1].healthy = false;
  std::vector<std::size_t> tried{0};
  auto decision = policy->decide({"m", std::nullopt, 0, tried}, workers);
  ASSERT_TRUE(decision.worker_index);
  EXPECT_EQ(*decision.worker_index, 2u);
  EXPECT_EQ(decision.reason, Reason::only_candidate);
  EXPECT_EQ(decision.candidates[0].ineligible_because, Ineligible::already_tried);
  EXPECT_EQ(decision.candidates[1].ineligible_because, Ineligible::unhealthy);
  EXPECT_TRUE(decision.candidates[2].eligible);
}

TEST(RoundRobin, NothingEligibleGivesNoWorker) {
  auto policy = make_round_robin();
  std::vector<WorkerView> workers{{"a", false, 0}};
  auto decision = policy->decide({"m", std::nullopt, 0, {}}, workers);
  EXPECT_FALSE(decision.worker_index);
  EXPECT_EQ(decision.reason, Reason::no_eligible_worker);
  ASSERT_EQ(decision.candidates.size(), 1u);
  EXPECT_FALSE(decision.candidates[0].eligible);
}

TEST(LeastLoad, PicksFewestInFlight) {
  auto policy = make_least_load();
  std::vector<WorkerView> workers{{"a", true, 5}, {"b", true, 1}, {"c", true, 3}};
  for (std::uint64_t sequence = 0; sequence < 3; ++sequence) {
    auto decision = policy->decide({"m", std::nullopt, sequence, {}}, workers);
    ASSERT_TRUE(decision.worker_index);
    EXPECT_EQ(*decision.worker_index, 1u);
    EXPECT_EQ(decision.reason, Reason::least_load);
    EXPECT_EQ(decision.candidates[0].score, 5.0);
  }
}

TEST(LeastLoad, TiesRotateInsteadOfPilingOnTheFirst) {
  auto policy = make_least_load();
  auto workers = three_workers();
  std::map<std::size_t, int> counts;
  for (std::uint64_t sequence = 0; sequence < 30; ++sequence) {
    counts[*policy->decide({"m", std::nullopt, sequence, {}}, workers).worker_index]++;
  }
  EXPECT_EQ(counts[0], 10);
  EXPECT_EQ(counts[1], 10);
  EXPECT_EQ(counts[2], 10);
}

// Two gateways see the same engine state but count decisions separately:
// with a tie-break from the request (session key or prompt head) they pick
// the same worker for the same request, whatever their own sequence.
TEST(LeastLoad, ATieBreakFromTheRequestOverridesTheGatewaysOwnSequence) {
  auto policy = make_least_load();
  auto workers = three_workers();
  std::map<std::size_t, int> counts;
  for (std::uint64_t tie_break = 0; tie_break < 30; ++tie_break) {
    std::optional<std::size_t> agreed;
    for (std::uint64_t sequence : {0U, 7U, 1000U}) {
      policy::RouteRequest request{"m", std::nullopt, sequence, {}};
      request.tie_break = tie_break * 0x9E3779B97F4A7C15ULL;
      auto picked = *policy->decide(request, workers).worker_index;
      if (agreed) {
        EXPECT_EQ(picked, *agreed) << tie_break;
      }
      agreed = picked;
    }
    counts[*agreed]++;
  }
  // Different requests still spread over the tied workers.
  EXPECT_EQ(counts.size(), 3u);
}

TEST(LeastLoad, SimulatedBurstSpreadsEvenly) {
  // The gateway counts a request as soon as it is dispatched, so a burst of
  // simultaneous arrivals sees the load it just created.
  auto policy = make_least_load();
  auto workers = three_workers();
  for (std::uint64_t sequence = 0; sequence < 9; ++sequence) {
    auto decision = policy->decide({"m", std::nullopt, sequence, {}}, workers);
    workers[*decision.worker_index].in_flight++;
  }
  for (const auto& worker : workers) {
    EXPECT_EQ(worker.in_flight, 3u) << worker.id;
  }
}

TEST(Policies, SameInputsSameDecision) {
  for (auto& policy : {make_round_robin(), make_least_load(), make_session_hash(), make_prefix_hash(4)}) {
    std::vector<WorkerView> workers{{"a", true, 2}, {"b", true, 2}, {"c", false, 0}};
    auto first = policy->decide({"m", "s", 17, {}}, workers);
    auto second = policy->decide({"m", "s", 17, {}}, workers);
    EXPECT_EQ(first.worker_index, second.worker_index) << policy->name();
    EXPECT_EQ(first.reason, second.reason);
  }
}

}  // namespace
}  // namespace kvgate::policy

namespace kvgate::policy {
namespace {

// Rendezvous hashing: a key keeps its worker whatever the load; when that
// worker goes, only its keys move; sessions spread over all workers.
TEST(SessionHash, ASessionStaysOnItsWorkerAndOnlyItsKeysMoveWhenItFails) {
  auto policy = make_session_hash();
  auto workers = three_workers();
  std::map<std::string, std::size_t> home;
  std::map<std::size_t, int> per_worker;
  for (int session = 0; session < 300; ++session) {
    auto key = "session-" + std::to_string(session);
    auto first = policy->decide({"m", key, 0, {}}, workers);
    ASSERT_TRUE(first.worker_index);
    EXPECT_EQ(first.reason, Reason::sticky);
    workers[*first.worker_index].in_flight = 50;  // load does not move a session
    auto again = policy->decide({"m", key, 7, {}}, workers);
    workers[*first.worker_index].in_flight = 0;
    EXPECT_EQ(again.worker_index, first.worker_index);
    home[key] = *first.worker_index;
    ++per_worker[*first.worker_index];
  }
  for (std::size_t worker = 0; worker < 3; ++worker) {
    EXPECT_GT(per_worker[worker], 60) << worker;  // about 100 each
  }
  workers[1].healthy = false;
  for (const auto& [key, worker] : home) {
    auto moved = policy->decide({"m", key, 0, {}}, workers);
    ASSERT_TRUE(moved.worker_index);
    if (worker != 1) {
      EXPECT_EQ(*moved.worker_index, worker) << key;
      EXPECT_EQ(moved.reason, Reason::sticky);
    } else {
      EXPECT_NE(*moved.worker_index, 1u);
      EXPECT_EQ(moved.reason, Reason::worker_unhealthy);
    }
  }
}

TEST(SessionHash, RequestsWithoutASessionGoToTheLeastLoaded) {
  auto policy = make_session_hash();
  auto workers = three_workers();
  workers[0].in_flight = 3;
  workers[2].in_flight = 1;
  auto decision = policy->decide({"m", std::nullopt, 0, {}}, workers);
  EXPECT_EQ(decision.worker_index, 1u);
  EXPECT_EQ(decision.reason, Reason::no_session);
}

TEST(PrefixHash, PromptsSharingTheirFirstBlocksShareAWorker) {
  auto policy = make_prefix_hash(2);
  auto workers = three_workers();
  std::vector<std::uint64_t> first{11, 22, 33, 44};
  std::vector<std::uint64_t> same_start{11, 22, 99};
  auto a = policy->decide({"m", "s1", 0, {}, 64, first}, workers);
  auto b = policy->decide({"m", "s2", 5, {}, 48, same_start}, workers);
  ASSERT_TRUE(a.worker_index);
  EXPECT_EQ(a.worker_index, b.worker_index);
  EXPECT_EQ(a.reason, Reason::prefix_affinity);
  // Different second blocks: some pair of prefixes lands elsewhere.
  bool moved = false;
  for (std::uint64_t second = 0; second < 16 && !moved; ++second) {
    std::vector<std::uint64_t> other{11, 100 + second};
    moved = policy->decide({"m", "s3", 0, {}, 32, other}, workers).worker_index != a.worker_index;
  }
  EXPECT_TRUE(moved);
  auto short_prompt = policy->decide({"m", "s4", 0, {}, 3, {}}, workers);
  EXPECT_EQ(short_prompt.reason, Reason::no_full_block);
}

// The cost tests price prefill at 0.1 ms per uncached token and nothing
// else, and count the own prefill once unless a test says otherwise.
constexpr PrefillRates kLinear{0.1, 0, 0, 0, 0, 0.1};

CostModel plain_cost(double per_request = 20, double per_waiting = 5) {
  CostModel cost;
  cost.queue_ms_per_request = per_request;
  cost.queue_ms_per_waiting_request = per_waiting;
  cost.own_prefill_weight = 1;
  return cost;
}

// Positional WorkerView initializers stop at cached_tokens; later fields by
// name (a removed field once shifted positional values silently).
std::vector<WorkerView> priced(std::vector<WorkerView> workers, PrefillRates rates = kLinear) {
  for (auto& worker : workers) {
    worker.prefill = rates;
  }
  return workers;
}

TEST(CacheAware, PrefersTheWorkerHoldingThePromptWhileThatPays) {
  auto policy = make_cache_aware(plain_cost());
  auto workers = priced({{"a", true, 1, 0, 0}, {"b", true, 1, 0, 3'200}});
  RouteRequest request{"m", std::nullopt, 0, {}, 4'000};
  auto decision = policy->decide(request, workers);
  EXPECT_EQ(decision.worker_index, 1u);
  EXPECT_EQ(decision.reason, Reason::best_cost);
  EXPECT_DOUBLE_EQ(decision.candidates[1].prefill_ms, 80);   // 800 uncached tokens
  EXPECT_DOUBLE_EQ(decision.candidates[0].prefill_ms, 400);  // all 4000
  EXPECT_DOUBLE_EQ(decision.candidates[1].expected_ttft_ms, 100);
  EXPECT_EQ(decision.candidates[1].cached_tokens, 3'200u);
}

TEST(CacheAware, BreaksAffinityWhenTheHoldersQueueCostsMoreThanTheSaving) {
  auto policy = make_cache_aware(plain_cost());
  // b saves 320 ms of prefill but has 5,000 prompt tokens (500 ms) queued.
  auto workers = priced({{"a", true, 0, 0, 0}, {"b", true, 2, 5'000, 3'200}});
  auto decision = policy->decide({"m", std::nullopt, 0, {}, 4'000}, workers);
  EXPECT_EQ(decision.worker_index, 0u);
  EXPECT_EQ(decision.reason, Reason::best_cost_no_cache);
}

TEST(CacheAware, RequestsTheEngineReportsWaitingCountAsQueue) {
  auto policy = make_cache_aware(plain_cost());
  // Same cache, same gateway load; b's engine has 10 requests waiting from
  // elsewhere.
  auto workers = priced({{.id = "a", .engine_snapshot_age_ms = 100}, {.id = "b", .engine_snapshot_age_ms = 100}});
  workers[1].engine_waiting_others = 10;
  auto decision = policy->decide({"m", std::nullopt, 1, {}, 100}, workers);
  EXPECT_EQ(decision.worker_index, 0u);
  EXPECT_DOUBLE_EQ(decision.candidates[1].queue_delay_ms, 50);
}

// Several gateways share a fleet: the requests another gateway queued on a
// worker show only in the engine's waiting count. Those beyond this
// gateway's own pending requests are priced as typical requests there; its
// own are priced by their tokens and not counted twice.
TEST(CacheAware, OtherGatewaysWaitingRequestsArePricedAsTypicalRequests) {
  auto policy = make_cache_aware(plain_cost(0, 5));
  // b holds 1,000 of the prompt's tokens (100 ms of prefill saved) but its
  // engine has 2 requests waiting that another gateway sent, of ~1,000
  // uncached tokens each: 2 x (100 + 5) = 210 ms.
  auto workers = priced(
      {{.id = "a", .engine_snapshot_age_ms = 10}, {.id = "b", .cached_tokens = 1'000, .engine_snapshot_age_ms = 10}});
  workers[1].engine_waiting_others = 2;
  workers[1].mean_uncached_tokens = 1'000;
  auto decision = policy->decide({"m", std::nullopt, 0, {}, 1'200}, workers);
  EXPECT_EQ(decision.worker_index, 0u);
  EXPECT_DOUBLE_EQ(decision.candidates[1].queue_delay_ms, 210);
  // Three of its own requests (3,000 tokens, 300 ms) wait there too, and
  // the engine counts all five: 300 + 210, not 300 + 5 x 105.
  // (The engine reports 5 waiting: 2 beyond the 3 pending at the scrape.)
  workers[1].pending_prefill_tokens = 3'000;
  decision = policy->decide({"m", std::nullopt, 0, {}, 1'200}, workers);
  EXPECT_DOUBLE_EQ(decision.candidates[1].queue_delay_ms, 510);
  // A snapshot older than the bound says nothing of the others.
  workers[1].engine_snapshot_age_ms = 60'000;
  decision = policy->decide({"m", std::nullopt, 0, {}, 1'200}, workers);
  EXPECT_DOUBLE_EQ(decision.candidates[1].queue_delay_ms, 300);
}

TEST(CacheAware, AnEngineSnapshotOlderThanTheBoundIsIgnored) {
  auto cost = plain_cost();
  cost.engine_snapshot_max_age_ms = 1'000;
  auto policy = make_cache_aware(cost);
  // b's engine reported a long queue, but 3 s ago (and never, for c): only
  // the gateway's own counts judge them.
  auto workers = priced({{.id = "a", .in_flight = 1, .engine_snapshot_age_ms = 10},
                         {.id = "b", .engine_snapshot_age_ms = 3'000},
                         {.id = "c", .engine_snapshot_age_ms = -1}});
  workers[1].engine_waiting_others = 50;
  workers[2].engine_waiting_others = 9;
  auto decision = policy->decide({"m", std::nullopt, 0, {}, 100}, workers);
  EXPECT_DOUBLE_EQ(decision.candidates[1].queue_delay_ms, 0);
  EXPECT_DOUBLE_EQ(decision.candidates[2].queue_delay_ms, 0);
  EXPECT_DOUBLE_EQ(decision.candidates[0].queue_delay_ms, 20);
  EXPECT_NE(decision.worker_index, 0u);
  workers[1].engine_snapshot_age_ms = 500;  // fresh: its queue counts again
  EXPECT_DOUBLE_EQ(policy->decide({"m", std::nullopt, 0, {}, 100}, workers).candidates[1].queue_delay_ms, 250);
}

TEST(CacheAware, EachWorkerIsPricedWithItsOwnRates) {
  auto policy = make_cache_aware(plain_cost());
  // b is twice as fast per token but pays for attention (b = 1e-5 ms per
  // token pair): it wins short prompts and loses long ones.
  std::vector<WorkerView> workers{{"a", true, 0}, {"b", true, 0}};
  workers[0].prefill = kLinear;
  workers[1].prefill = {0.05, 1e-5, 0, 40, 0, 0.05};
  auto short_prompt = policy->decide({"m", std::nullopt, 0, {}, 1'000}, workers);
  EXPECT_EQ(short_prompt.worker_index, 1u);
  EXPECT_DOUBLE_EQ(short_prompt.candidates[1].prefill_ms, 55);  // 50 + 1e-5 * 1000^2 / 2
  auto long_prompt = policy->decide({"m", std::nullopt, 0, {}, 20'000}, workers);
  EXPECT_EQ(long_prompt.worker_index, 0u);
  EXPECT_DOUBLE_EQ(long_prompt.candidates[1].prefill_ms, 3'000);
  // The queue ahead is priced at each worker's own per-token rate.
  workers[0].pending_prefill_tokens = workers[1].pending_prefill_tokens = 1'000;
  auto queued = policy->decide({"m", std::nullopt, 0, {}, 1'000}, workers);
  EXPECT_DOUBLE_EQ(queued.candidates[0].queue_delay_ms, 100);
  EXPECT_DOUBLE_EQ(queued.candidates[1].queue_delay_ms, 50);
  // Cached tokens are subtracted from both terms: (L^2 - cached^2) / 2.
  workers[1].cached_tokens = 600;
  auto cached = policy->decide({"m", std::nullopt, 0, {}, 1'000}, workers);
  EXPECT_DOUBLE_EQ(cached.candidates[1].prefill_ms, 0.05 * 400 + 1e-5 * (1e6 - 360'000) / 2);
}

TEST(CacheAware, LearnedNoiseIsATieBrokenByTheFewestBlocksButARealDifferenceWins) {
  auto policy = make_cache_aware(plain_cost());
  // Two idle workers, nothing cached: a learned 3% cheaper than b, but each
  // fit's requests scatter by 10% around it; b holds fewer blocks.
  std::vector<WorkerView> workers{{"a", true, 0}, {"b", true, 0}};
  workers[0].prefill = kLinear;
  workers[0].prefill.ms_per_token *= 0.97;
  workers[1].prefill = kLinear;
  workers[0].prefill.relative_noise = workers[1].prefill.relative_noise = 0.1;
  workers[0].indexed_blocks = 120;
  workers[1].indexed_blocks = 40;
  for (std::uint64_t tie_break : {0u, 1u, 7u}) {
    RouteRequest request{"m", std::nullopt, 0, {}, 1'000};
    request.tie_break = tie_break;
    EXPECT_EQ(policy->decide(request, workers).worker_index, 1u) << tie_break;
  }
  // Without learned noise (the priors) the cheaper price wins.
  workers[0].prefill.relative_noise = workers[1].prefill.relative_noise = 0;
  EXPECT_EQ(policy->decide({"m", std::nullopt, 0, {}, 1'000}, workers).worker_index, 0u);
  // Twice the cost is beyond the noise: the fuller but faster worker wins.
  workers[0].prefill.relative_noise = workers[1].prefill.relative_noise = 0.1;
  workers[1].prefill.ms_per_token = 2 * kLinear.ms_per_token;
  EXPECT_EQ(policy->decide({"m", std::nullopt, 0, {}, 1'000}, workers).worker_index, 0u);
  // A worker holding more of the prompt is no tie, whatever the noise.
  workers[1].prefill = workers[0].prefill;
  workers[0].cached_tokens = 16;
  workers[0].indexed_blocks = 4'000;
  EXPECT_EQ(policy->decide({"m", std::nullopt, 0, {}, 1'000}, workers).worker_index, 0u);
}

TEST(CacheAware, TheOwnPrefillWeightChargesTheWorkAPlacementAdds) {
  // a is idle and holds nothing (400 ms of prefill); b holds most of the
  // prompt (80 ms) behind 350 ms of queue. Plain expected TTFT picks a
  // (400 < 430); counting the own prefill 1.5 times picks b (600 > 470),
  // and the expected TTFT shown stays unweighted.
  auto workers = priced({{"a", true, 0, 0, 0}, {"b", true, 0, 3'500, 3'200}});
  RouteRequest request{"m", std::nullopt, 0, {}, 4'000};
  auto cost = plain_cost(0);
  EXPECT_EQ(make_cache_aware(cost)->decide(request, workers).worker_index, 0u);
  cost.own_prefill_weight = 1.5;
  auto weighted = make_cache_aware(cost)->decide(request, workers);
  EXPECT_EQ(weighted.worker_index, 1u);
  EXPECT_DOUBLE_EQ(weighted.candidates[1].expected_ttft_ms, 430);
  EXPECT_DOUBLE_EQ(weighted.candidates[1].score, 470);
  EXPECT_FALSE(CostModel{}.own_prefill_weight);  // unset: the fleet's price of work (work_price.hpp)
}

TEST(CacheAware, ASoftMarginLeavesAnOverloadedWorkerOnlyWhenThatIsCheap) {
  // b holds the prompt behind a long queue: 1,000 ms, over the bound of
  // 1.25 x (1,000 + 100) / 3 = 458 ms; a and c are idle.
  auto workers = priced({{"a", true, 0, 0, 0}, {"b", true, 0, 10'000, 15'000}, {"c", true, 0, 0, 0}});
  RouteRequest request{"m", std::nullopt, 0, {}, 16'000};
  auto cost = plain_cost(0);
  auto unbounded = make_cache_aware(cost)->decide(request, workers);
  ASSERT_EQ(unbounded.worker_index, 1u);  // 1,000 + 100 < 1,600: no bound by default
  cost.soft_margin_ms = 100;              // the idle workers are 500 ms worse: b stays
  EXPECT_EQ(make_cache_aware(cost)->decide(request, workers).worker_index, 1u);
  cost.soft_margin_ms = 600;  // within the margin: the bound wins
  auto bounded = make_cache_aware(cost)->decide(request, workers);
  EXPECT_NE(bounded.worker_index, 1u);
  EXPECT_EQ(bounded.reason, Reason::load_bound);
}

TEST(Reasons, EveryReasonHasItsOwnSpelling) {
  std::set<std::string_view> spellings;
  for (int value = 0; value <= static_cast<int>(kLastReason); ++value) {
    auto spelling = to_string(static_cast<Reason>(value));
    EXPECT_NE(spelling, "unknown") << value;
    EXPECT_TRUE(spellings.insert(spelling).second) << spelling;
  }
  EXPECT_TRUE(is_session_move(Reason::moved_queue));
  EXPECT_FALSE(is_session_move(Reason::sticky));
  EXPECT_FALSE(is_session_move(Reason::new_session));
}

// Candidate is a plain value (the allocation count is measured by the
// router_decide benchmark): the worker id views the WorkerView's string.
TEST(Candidates, AreValuesThatViewTheWorkersIds) {
  static_assert(std::is_trivially_copyable_v<Candidate>);
  std::vector<WorkerView> workers{{"a", true, 0}};
  auto decision = make_cache_aware({})->decide({"m", std::nullopt, 0, {}, 10}, workers);
  EXPECT_EQ(decision.candidates[0].worker.data(), workers[0].id.data());
}

// A slot engine with every slot busy: the new request starts when the
// requests ahead of a free slot have released theirs. b holds the prompt
// (saves 320 ms) but runs 3 requests on 2 slots: 2 ahead at its learned
// 400 ms each outweigh the saving; with one more slot, one is free.
TEST(CacheAware, ASlotEngineWithEverySlotBusyCostsTheWaitForOne) {
  auto policy = make_cache_aware(plain_cost(0, 5));
  auto workers = priced({{"a", true, 1, 0, 0}, {"b", true, 3, 0, 3'200}});
  for (auto& worker : workers) {
    worker.slots = 2;
    worker.ms_per_request_ahead = 400;
  }
  auto decision = policy->decide({"m", std::nullopt, 0, {}, 4'000}, workers);
  EXPECT_EQ(decision.worker_index, 0u);
  EXPECT_EQ(decision.candidates[0].requests_ahead, 0u);
  EXPECT_EQ(decision.candidates[1].requests_ahead, 2u);
  EXPECT_DOUBLE_EQ(decision.candidates[1].slot_wait_ms, 800);
  EXPECT_DOUBLE_EQ(decision.candidates[1].expected_ttft_ms, 880);
  workers[1].slots = 4;
  auto roomier = policy->decide({"m", std::nullopt, 0, {}, 4'000}, workers);
  EXPECT_EQ(roomier.worker_index, 1u);
  EXPECT_EQ(roomier.candidates[1].slot_wait_ms, 0);
  // Requests the engine reports waiting from elsewhere are ahead too.
  workers[1].engine_waiting_others = 1;
  workers[1].engine_snapshot_age_ms = 100;
  EXPECT_EQ(policy->decide({"m", std::nullopt, 0, {}, 4'000}, workers).candidates[1].requests_ahead, 1u);
  workers[1].in_flight = 4;
  EXPECT_EQ(policy->decide({"m", std::nullopt, 0, {}, 4'000}, workers).candidates[1].requests_ahead, 2u);
}

// A session's turn leaves its previous worker only when the gain beats both
// expectations' calibrated error. a (previous) is expected 40 ms later than
// b; with no calibration the price decides, within a 30% error on each side
// (~94 ms) the turn stays, and a gain far beyond it moves.
TEST(WorkPrice, IsOnePlusTheRequestsWaitingPerWorker) {
  EXPECT_DOUBLE_EQ(fleet_work_price(0, 4), 1);  // an idle fleet: the request's own TTFT
  EXPECT_DOUBLE_EQ(fleet_work_price(6, 4), 2.5);
  EXPECT_DOUBLE_EQ(fleet_work_price(12, 4), 4);  // grows with the waiting
  // No workers, or counts that are not counts: the plain TTFT price.
  EXPECT_DOUBLE_EQ(fleet_work_price(6, 0), 1);
  EXPECT_DOUBLE_EQ(fleet_work_price(-3, 4), 1);
  EXPECT_DOUBLE_EQ(fleet_work_price(std::numeric_limits<double>::quiet_NaN(), 4), 1);
  EXPECT_DOUBLE_EQ(fleet_work_price(std::numeric_limits<double>::infinity(), 4), 1);
}

TEST(CacheAware, TheFleetsPriceOfWorkKeepsATurnWhereItsPromptIsOnlyWhenRequestsWait) {
  // b holds most of the prompt (80 ms of prefill) behind 350 ms of queue; a
  // is idle and holds nothing (400 ms). With nothing waiting the price is
  // 1 and the expected TTFT picks a (400 < 430). With 3 requests waiting
  // on b and 1 on a (another gateway's, from a fresh engine snapshot), the
  // fleet's work costs 1 + 4 / 2 = 3 ms a ms: a's 400 ms of work scores
  // 1,200, b's 80 ms 350 + 240 = 590: b keeps it.
  auto workers = priced({{"a", true, 0, 0, 0}, {"b", true, 3, 3'500, 3'200}});
  RouteRequest request{"m", std::nullopt, 0, {}, 4'000};
  auto cost = plain_cost(0, 0);
  cost.own_prefill_weight.reset();
  auto idle = make_cache_aware(cost)->decide(request, workers);
  EXPECT_EQ(idle.worker_index, 0u);
  EXPECT_DOUBLE_EQ(idle.work_price, 1);
  workers[1].pending_requests = 3;
  workers[0].engine_waiting_others = 1;
  workers[0].engine_snapshot_age_ms = 100;
  auto busy = make_cache_aware(cost)->decide(request, workers);
  EXPECT_DOUBLE_EQ(busy.work_price, 3);
  EXPECT_EQ(busy.worker_index, 1u);
  EXPECT_DOUBLE_EQ(busy.candidates[1].score, 590);
  EXPECT_DOUBLE_EQ(busy.candidates[1].expected_ttft_ms, 430);  // the expected TTFT stays unweighted
  // A stale snapshot's waiting requests are not counted.
  workers[0].engine_snapshot_age_ms = cost.engine_snapshot_max_age_ms + 1;
  EXPECT_DOUBLE_EQ(make_cache_aware(cost)->decide(request, workers).work_price, 2.5);
  // Nor an ineligible worker's.
  workers.push_back({.id = "c", .healthy = false});
  workers.back().prefill = kLinear;
  workers.back().pending_requests = 40;
  EXPECT_DOUBLE_EQ(make_cache_aware(cost)->decide(request, workers).work_price, 2.5);
  workers.pop_back();
  // A fixed weight overrides the fleet's price.
  cost.own_prefill_weight = 1;
  auto fixed = make_cache_aware(cost)->decide(request, workers);
  EXPECT_DOUBLE_EQ(fixed.work_price, 1);
  EXPECT_EQ(fixed.worker_index, 0u);
}

TEST(Congestion, GrowsWithTheWorkersLoadAndWithTheSquareOfTheWork) {
  // 10 requests a second, the prefill half busy: 100 ms of work behind 50 ms
  // of queue drains in (50 + 100) / 0.5 = 300 ms; the 3 requests arriving
  // meanwhile wait up to 100 ms more (those during the work itself, half).
  const WorkerTraffic busy{0.01, 0.5};
  EXPECT_DOUBLE_EQ(congestion_ms(100, 50, busy), 200);
  EXPECT_DOUBLE_EQ(congestion_ms(100, 0, busy), 100);
  EXPECT_DOUBLE_EQ(congestion_ms(200, 0, busy), 400);  // twice the work, four times the cost
  EXPECT_GT(congestion_ms(100, 50, {0.01, 0.9}), 4 * congestion_ms(100, 50, busy));
  // Nothing known, or nothing to compute: no cost.
  EXPECT_EQ(congestion_ms(100, 50, {}), 0);
  EXPECT_EQ(congestion_ms(0, 50, busy), 0);
  // A saturated worker's spare rate is bounded below: finite, and above
  // any unsaturated worker's.
  EXPECT_DOUBLE_EQ(congestion_ms(100, 0, {0.01, 3}), 100 * 0.01 * 50 / kMinSpareRate);
  // Figures that are not numbers price nothing, never a NaN score.
  const double nan = std::numeric_limits<double>::quiet_NaN();
  EXPECT_EQ(congestion_ms(nan, 50, busy), 0);
  EXPECT_EQ(congestion_ms(100, 50, {nan, 0.5}), 0);
  EXPECT_DOUBLE_EQ(congestion_ms(100, nan, busy), 100);
  EXPECT_DOUBLE_EQ(congestion_ms(100, -20, busy), 100);
  EXPECT_DOUBLE_EQ(congestion_ms(100, 0, {0.01, nan}), 100 * 0.01 * 50);
}

TEST(CacheAware, TheCongestionCostKeepsATurnWhereItsPromptIsOnABusyFleetOnly) {
  // b holds most of the prompt (80 ms of prefill) behind 350 ms of queue; a
  // is idle and holds nothing (400 ms). The expected TTFT picks a (400 <
  // 430), and so does the congestion cost on a nearly idle fleet. On a busy
  // fleet a's 400 ms of work delays the requests after it far more than
  // b's 80 ms: b. Busy b and idle a are priced at the fleet's means, so
  // the idle worker's work is not free.
  auto workers = priced({{"a", true, 0, 0, 0}, {"b", true, 0, 3'500, 3'200}});
  RouteRequest request{"m", std::nullopt, 0, {}, 4'000};
  auto cost = plain_cost(0);
  cost.congestion_cost = true;
  workers[1].traffic = {0.000'2, 0.02};
  auto idle = make_cache_aware(cost)->decide(request, workers);
  EXPECT_EQ(idle.worker_index, 0u);
  EXPECT_GT(idle.candidates[0].congestion_ms, 0);
  workers[1].traffic = {0.01, 1.2};
  auto busy = make_cache_aware(cost)->decide(request, workers);
  EXPECT_EQ(busy.worker_index, 1u);
  // The fleet's means: 0.005 requests and 0.6 ms of prefill per ms, 175 ms
  // of queue. 80 x 0.005 x (175 + 40) / 0.4 and 400 x 0.005 x (175 + 200) /
  // 0.4, in the score only.
  EXPECT_DOUBLE_EQ(busy.candidates[1].congestion_ms, 215);
  EXPECT_DOUBLE_EQ(busy.candidates[0].congestion_ms, 1'875);
  EXPECT_DOUBLE_EQ(busy.candidates[1].expected_ttft_ms, 430);
  EXPECT_DOUBLE_EQ(busy.candidates[1].score, 645);
  // An ineligible worker's traffic and queue are not the fleet's.
  workers.push_back({.id = "c", .healthy = false});
  workers.back().prefill = kLinear;
  workers.back().traffic = {1, 50};
  EXPECT_DOUBLE_EQ(make_cache_aware(cost)->decide(request, workers).candidates[1].congestion_ms, 215);
  workers.pop_back();
  // Off (the default): not computed, and the expected TTFT decides.
  cost.congestion_cost = false;
  auto off = make_cache_aware(cost)->decide(request, workers);
  EXPECT_EQ(off.worker_index, 0u);
  EXPECT_LT(off.candidates[0].congestion_ms, 0);
  EXPECT_FALSE(CostModel{}.congestion_cost);
}

TEST(CacheAware, ASessionMovesOnlyWhenTheGainBeatsTheCalibratedError) {
  auto with_margin = plain_cost(0, 5);
  with_margin.move_margin = true;
  auto policy = make_cache_aware(with_margin);
  auto workers = priced({{"a", true, 0, 1'400, 0}, {"b", true, 0, 1'000, 0}});
  RouteRequest request{"m", "s", 0, {}, 1'000};
  request.previous_turn = RouteRequest::PreviousTurn{0, 1'000};
  auto priced_only = policy->decide(request, workers);
  EXPECT_EQ(priced_only.worker_index, 1u);
  for (auto& worker : workers) {
    worker.ttft_relative_error = 0.3;
  }
  auto kept = policy->decide(request, workers);
  EXPECT_EQ(kept.worker_index, 0u);
  EXPECT_EQ(kept.reason, Reason::within_margin);
  auto without = plain_cost(0, 5);
  without.move_margin = false;
  EXPECT_EQ(make_cache_aware(without)->decide(request, workers).worker_index, 1u);
  workers[0].pending_prefill_tokens = 10'000;  // 1 s queued on a
  auto moved = policy->decide(request, workers);
  EXPECT_EQ(moved.worker_index, 1u);
  EXPECT_NE(moved.reason, Reason::within_margin);
  // Without a previous turn there is nothing to keep.
  workers[0].pending_prefill_tokens = 1'400;
  request.previous_turn.reset();
  EXPECT_EQ(policy->decide(request, workers).worker_index, 1u);
}

TEST(CacheAware, SkipsIneligibleWorkersAndSaysWhenOneIsLeft) {
  auto policy = make_cache_aware(plain_cost());
  auto workers = priced({{"a", true, 0, 0, 0}, {"b", false, 0, 0, 4'000}});
  auto decision = policy->decide({"m", std::nullopt, 0, {}, 4'000}, workers);
  EXPECT_EQ(decision.worker_index, 0u);
  EXPECT_EQ(decision.reason, Reason::only_candidate);
  EXPECT_FALSE(decision.candidates[1].eligible);
  std::vector<std::size_t> tried{0};
  EXPECT_FALSE(policy->decide({"m", std::nullopt, 0, tried, 4'000}, workers).worker_index);
}

}  // namespace
}  // namespace kvgate::policy

namespace kvgate::policy {
namespace {

WorkerView loaded(std::string_view id, std::uint32_t in_flight, std::uint32_t cached, std::uint64_t pending = 0,
                  std::uint64_t active = 0, std::uint64_t indexed = 0) {
  WorkerView view{id, true, in_flight, pending, cached};
  view.active_tokens = active;
  view.indexed_blocks = indexed;
  return view;
}

// Dynamo: logit = overlap_weight x (uncached prompt + pending prefill) +
// active prompt tokens; lowest wins.
TEST(DynamoCost, WeighsPrefillLeftAgainstTheDecodeLoadAlreadyThere) {
  auto policy = make_dynamo_cost({1.0});
  // a holds 3,000 of 4,000 tokens but decodes 5,000 tokens of other
  // prompts; b holds nothing and is idle.
  std::vector<WorkerView> workers{loaded("a", 2, 3'000, 0, 5'000), loaded("b", 0, 0)};
  auto decision = policy->decide({"m", std::nullopt, 0, {}, 4'000}, workers);
  EXPECT_DOUBLE_EQ(decision.candidates[0].score, 1'000 + 5'000);
  EXPECT_DOUBLE_EQ(decision.candidates[1].score, 4'000);
  EXPECT_EQ(decision.worker_index, 1u);
  EXPECT_EQ(decision.reason, Reason::best_cost_no_cache);
  // A heavier overlap weight makes the cached prefix win.
  auto weighted = make_dynamo_cost({3.0})->decide({"m", std::nullopt, 0, {}, 4'000}, workers);
  EXPECT_EQ(weighted.worker_index, 0u);
  EXPECT_EQ(weighted.reason, Reason::best_cost);
}

TEST(DynamoCost, PendingPrefillCountsAsPrefillStillToCompute) {
  auto policy = make_dynamo_cost({1.0});
  std::vector<WorkerView> workers{loaded("a", 1, 2'000, 3'000), loaded("b", 0, 0)};
  auto decision = policy->decide({"m", std::nullopt, 0, {}, 2'400}, workers);
  EXPECT_DOUBLE_EQ(decision.candidates[0].score, 400 + 3'000);
  EXPECT_EQ(decision.worker_index, 1u);
}

// SGLang: imbalance first, then the longest match above the threshold, else
// the smallest cache.
TEST(SglangCacheAware, ALongEnoughMatchWinsWhileTheFleetIsBalanced) {
  auto policy = make_sglang_cache_aware({});
  std::vector<WorkerView> workers{loaded("a", 5, 100, 0, 0, 900), loaded("b", 3, 600, 0, 0, 50),
                                  loaded("c", 2, 0, 0, 0, 10)};
  auto decision = policy->decide({"m", std::nullopt, 0, {}, 1'000}, workers);
  EXPECT_EQ(decision.worker_index, 1u);  // 60% > 30%
  EXPECT_EQ(decision.reason, Reason::prefix_match);
}

TEST(SglangCacheAware, AShortMatchGoesToTheWorkerHoldingLeast) {
  auto policy = make_sglang_cache_aware({});
  std::vector<WorkerView> workers{loaded("a", 0, 250, 0, 0, 900), loaded("b", 0, 0, 0, 0, 50),
                                  loaded("c", 0, 0, 0, 0, 400)};
  auto decision = policy->decide({"m", std::nullopt, 0, {}, 1'000}, workers);
  EXPECT_EQ(decision.worker_index, 1u);  // 25% is not enough; b's cache is the smallest
  EXPECT_EQ(decision.reason, Reason::smallest_cache);
}

TEST(SglangCacheAware, AnImbalancedFleetGoesToTheLeastLoadedWhateverTheCache) {
  auto policy = make_sglang_cache_aware({});
  // max - min = 70 > 64 and 80 > 1.5 x 10.
  std::vector<WorkerView> workers{loaded("a", 80, 900), loaded("b", 10, 0), loaded("c", 30, 0)};
  auto decision = policy->decide({"m", std::nullopt, 0, {}, 1'000}, workers);
  EXPECT_EQ(decision.worker_index, 1u);
  EXPECT_EQ(decision.reason, Reason::imbalanced);
  // Both thresholds must be crossed: 70 apart but 220 < 1.5 x 150 is balanced.
  std::vector<WorkerView> close{loaded("a", 220, 900), loaded("b", 150, 0)};
  auto balanced = policy->decide({"m", std::nullopt, 0, {}, 1'000}, close);
  EXPECT_EQ(balanced.worker_index, 0u);
  EXPECT_EQ(balanced.reason, Reason::prefix_match);
}

}  // namespace
}  // namespace kvgate::policy
