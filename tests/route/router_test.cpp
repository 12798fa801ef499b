// The router on synthetic fleets: real policies, a real prefix index and
// session table, worker state driven by hand. No sockets.
#include <gtest/gtest.h>

#include <numeric>

#include "kvgate/obs/exposition.hpp"
#include "kvgate/route/explain.hpp"
#include "kvgate/route/outlier_filter.hpp"
#include "kvgate/route/router.hpp"

namespace kvgate::route {
namespace {

using policy::Reason;

constexpr std::uint64_t kNow = 1'700'000'000'000;
// 0.1 ms per uncached token, nothing else: the tests' arithmetic stays legible.
constexpr policy::PrefillRates kLinearPrefill{0.1, 0, 0, 0, 0, 0.1};

// The configured priors that kLinearPrefill stands for (what the default
// prefill_fit, relative, prices workers at).
void use_linear_priors(config::Options& options) {
  auto& cost = options.routing.cache_aware;
  cost.prefill_ms_per_token = kLinearPrefill.ms_per_token;
  cost.prefill_ms_per_token_pair = 0;
  cost.prefill_base_ms = 0;
  cost.prefill_ms_per_active_token = 0;
}

class Fleet {
 public:
  explicit Fleet(std::shared_ptr<const policy::Policy> policy, std::size_t workers = 3, config::Options options = {}) {
    options.sessions.idle_ttl = std::chrono::minutes(30);
    use_linear_priors(options);
    table.options = std::make_shared<config::Options>(options);
    table.policy = std::move(policy);
    model.name = "m";
    model.block_size = 16;
    model.cache = std::make_shared<kv_events::ModelCache>("m", 16, 1u << 20);
    for (std::size_t index = 0; index < workers; ++index) {
      auto id = std::string(1, static_cast<char>('a' + index));
      model.workers.push_back({std::make_shared<workers::WorkerState>(id, "http://127.0.0.1:1", HttpUrl{}, "m"),
                               static_cast<index::WorkerSlot>(index), config::WorkerOptions{}});
      policy::PrefillFitOptions linear;
      linear.prior = kLinearPrefill;
      model.workers.back().state->costs().set_prefill_prior(linear);
      model.pooled_prefill->set_prior(linear);
    }
  }

  workers::WorkerState& worker(std::size_t index) { return *model.workers[index].state; }

  // Every worker a slot engine (llama-server -np `slots`).
  void slot_engines(std::uint32_t slots) {
    for (auto& route : model.workers) {
      route.options.cache_model = config::CacheModel::sequences;
      route.options.slots = slots;
    }
  }

  // The gateway's series and the fleet's workers'.
  std::string exposition() {
    std::vector<const obs::WorkerSeries*> series;
    for (const auto& route : model.workers) {
      series.push_back(&route.state->series());
    }
    return metrics.serialize(series);
  }

  // The worker's cache holds the prompt's first `blocks` blocks.
  void hold(std::size_t worker, const prompt::PreparedPrompt& prompt, std::size_t blocks) {
    model.cache->caches.assume(model.workers[worker].slot, std::span(prompt.blocks).first(blocks), 0, UINT64_MAX / 2,
                               1u << 20);
  }

  RouteDecision decide(const prompt::PreparedPrompt& prompt, std::optional<std::string_view> session,
                       std::uint64_t sequence = 0, std::uint64_t now = kNow) {
    return router.decide(table, model, &prompt, {session, sequence, {}, now});
  }

  // Decides and commits one turn, as the forwarder does.
  RouteDecision turn(const prompt::PreparedPrompt& prompt, std::string_view session, std::uint64_t now = kNow) {
    RouteContext context{session, 0, {}, now};
    auto decision = router.decide(table, model, &prompt, context);
    auto attempt = router.commit(table, model, decision, &prompt, context);
    attempt.end(AttemptEnd::served, workers::FailureCause::none, now);
    return decision;
  }

  // Serves `decision` on `worker` (whatever it chose) and completes it with
  // the engine's `outcome`, as a response that ended would.
  void serve(RouteDecision decision, const prompt::PreparedPrompt& prompt, std::size_t worker,
             const ResponseOutcome& outcome) {
    decision.worker = worker;
    RouteContext context{std::nullopt, 0, {}, kNow};
    auto attempt = router.commit(table, model, decision, &prompt, context);
    attempt.end(AttemptEnd::served, workers::FailureCause::none, kNow);
    attempt.complete(outcome);
  }

  RoutingTable table;
  ModelRoute model;
  SessionTable sessions;
  obs::Exposition metrics;
  SessionStats session_stats{metrics.registry()};
  Router router{sessions, session_stats};
};

// A prompt of `tokens` tokens whose blocks are numbered from `first`
// (prompts with the same numbers share those blocks).
prompt::PreparedPrompt prompt_of(std::uint32_t tokens, std::uint64_t first = 1) {
  prompt::PreparedPrompt prompt;
  prompt.input_tokens = tokens;
  prompt.blocks.resize(tokens / 16);
  std::iota(prompt.blocks.begin(), prompt.blocks.end(), first);
  return prompt;
}

std::shared_ptr<const policy::Policy> cache_aware() {
  policy::CostModel cost;
  cost.queue_ms_per_request = 1;
  cost.queue_ms_per_waiting_request = 5;
  cost.own_prefill_weight = 1;
  return policy::make_cache_aware(cost);
}

TEST(Router, DecideHasNoSideEffects) {
  Fleet fleet(cache_aware());
  auto prompt = prompt_of(640);
  auto first = fleet.decide(prompt, "s");
  auto again = fleet.decide(prompt, "s");
  EXPECT_EQ(first.worker, again.worker);
  EXPECT_EQ(first.reason, Reason::new_session);
  EXPECT_EQ(again.reason, Reason::new_session);
  EXPECT_FALSE(fleet.sessions.find("s", kNow));
  for (std::size_t worker = 0; worker < 3; ++worker) {
    EXPECT_EQ(fleet.worker(worker).load().in_flight(), 0u);
    EXPECT_EQ(fleet.worker(worker).load().pending_prefill_tokens(), 0u);
    EXPECT_EQ(fleet.model.cache->index.entries_of(fleet.model.workers[worker].slot), 0u);
  }
}

TEST(Router, CommitAccountsTheLoadAndRemembersTheSession) {
  Fleet fleet(cache_aware());
  auto prompt = prompt_of(640);
  fleet.hold(1, prompt, 20);  // 320 of the 640 tokens on b
  RouteContext context{"s", 0, {}, kNow};
  auto decision = fleet.router.decide(fleet.table, fleet.model, &prompt, context);
  ASSERT_EQ(decision.worker, 1u);
  EXPECT_EQ(decision.predicted_cached_tokens, 320u);
  {
    auto attempt = fleet.router.commit(fleet.table, fleet.model, decision, &prompt, context);
    EXPECT_EQ(attempt.session_turn(), 1u);
    EXPECT_EQ(fleet.worker(1).load().in_flight(), 1u);
    EXPECT_EQ(fleet.worker(1).load().pending_prefill_tokens(), 320u);  // the uncached part
    EXPECT_EQ(fleet.worker(1).load().active_tokens(), 640u);           // the whole prompt, until it finishes
    auto session = fleet.sessions.find("s", kNow);
    ASSERT_TRUE(session);
    EXPECT_EQ(session->worker, "b");
    EXPECT_EQ(session->last_input_tokens, 640u);
  }
  EXPECT_EQ(fleet.worker(1).load().in_flight(), 0u);  // the attempt ended
  EXPECT_EQ(fleet.worker(1).load().pending_prefill_tokens(), 0u);
  EXPECT_EQ(fleet.worker(1).load().active_tokens(), 0u);
}

TEST(Router, ASessionStaysWhereItsTurnsAreCached) {
  Fleet fleet(cache_aware());
  auto first = prompt_of(320);
  auto served = fleet.turn(first, "s");
  ASSERT_TRUE(served.worker);
  fleet.hold(*served.worker, first, 19);
  auto second = prompt_of(480);  // the first turn's blocks, then more
  auto next = fleet.decide(second, "s");
  EXPECT_EQ(next.worker, served.worker);
  EXPECT_EQ(next.reason, Reason::sticky);
  EXPECT_EQ(next.policy_reason, Reason::best_cost);
  ASSERT_TRUE(next.session);
  EXPECT_EQ(next.session->turns, 1u);
}

// The session remembers its worker's position as a hint; a reload that
// reorders the workers (discovery listing them anew) must not make the
// hint name another worker.
TEST(Router, ASessionFindsItsWorkerAfterAReloadReordersTheWorkers) {
  Fleet fleet(cache_aware());
  auto first = prompt_of(320);
  auto served = fleet.turn(first, "s");
  ASSERT_TRUE(served.worker);
  const std::size_t was = *served.worker;
  ASSERT_EQ(fleet.sessions.find("s", kNow)->worker_position, was);
  fleet.hold(was, first, 19);
  // Reloaded: the session's worker (its state and cache slot) moves to
  // another position, and another worker takes the one it had.
  const std::size_t now_at = (was + 1) % 3;
  std::swap(fleet.model.workers[was], fleet.model.workers[now_at]);
  auto second = prompt_of(480);
  auto next = fleet.decide(second, "s");
  EXPECT_EQ(next.worker, now_at);
  EXPECT_EQ(next.reason, Reason::sticky);
  // And removed: the hint's position holds another worker, no position
  // holds the session's.
  fleet.model.workers.erase(fleet.model.workers.begin() + static_cast<std::ptrdiff_t>(now_at));
  auto gone = fleet.decide(second, "s");
  ASSERT_TRUE(gone.worker);
  EXPECT_EQ(gone.reason, Reason::moved_unhealthy);
}

TEST(Router, ASessionLeavesAQueuedWorkerAndSaysSo) {
  Fleet fleet(cache_aware());
  auto first = prompt_of(320);
  auto served = fleet.turn(first, "s");
  const auto home = *served.worker;
  fleet.hold(home, first, 19);
  // 10,000 prompt tokens queued there (1 s) against 30 ms of prefill saved.
  fleet.worker(home).load().prefill_added(10'000);
  auto next = fleet.decide(prompt_of(480), "s");
  ASSERT_TRUE(next.worker);
  EXPECT_NE(*next.worker, home);
  EXPECT_EQ(next.reason, Reason::moved_queue);
  fleet.worker(home).load().prefill_answered(10'000);
}

// The fleet's price of work (policy/work_price.hpp) counts the requests
// waiting for a first token: the same queue that moves an idle fleet's
// turn keeps it once requests wait everywhere, and the decision says what
// it left behind when it moves.
TEST(Router, WaitingRequestsRaiseThePriceOfWorkAndKeepATurnWhereItsPromptIs) {
  policy::CostModel cost;
  cost.queue_ms_per_request = 1;
  cost.queue_ms_per_waiting_request = 5;
  Fleet fleet(policy::make_cache_aware(cost));
  auto first = prompt_of(3'200);
  auto served = fleet.turn(first, "s");
  const auto home = *served.worker;
  fleet.hold(home, first, 199);
  // 6,000 prompt tokens queued at home (about 160 ms at the priors)
  // against the ~90 ms of prefill its 3,184 cached tokens save: with one
  // request waiting in the fleet, a move.
  fleet.worker(home).load().prefill_added(6'000);
  auto second = prompt_of(3'520);
  auto idle = fleet.decide(second, "s");
  ASSERT_TRUE(idle.worker);
  EXPECT_NE(*idle.worker, home);
  EXPECT_EQ(idle.reason, Reason::moved_queue);
  EXPECT_DOUBLE_EQ(idle.work_price, 2.0 - 2.0 / 3);  // the one waiting request over 3 workers, plus 1
  EXPECT_EQ(idle.best_cached_tokens, 3'184u);
  EXPECT_LT(idle.predicted_cached_tokens, idle.best_cached_tokens);
  // Two requests waiting on each of the others: each ms of work now
  // delays the fleet's waiting requests too, and the turn stays.
  for (std::size_t worker = 0; worker < 3; ++worker) {
    if (worker != home) {
      fleet.worker(worker).load().prefill_added(1);
      fleet.worker(worker).load().prefill_added(1);
    }
  }
  auto busy = fleet.decide(second, "s");
  EXPECT_DOUBLE_EQ(busy.work_price, 1 + 5.0 / 3);
  EXPECT_EQ(busy.worker, home);
  EXPECT_EQ(busy.reason, Reason::sticky);
  EXPECT_EQ(busy.best_cached_tokens, busy.predicted_cached_tokens);
}

TEST(Router, ASessionWhoseBlocksWereEvictedMovesWithThatReason) {
  Fleet fleet(cache_aware());
  auto first = prompt_of(320);
  auto served = fleet.turn(first, "s");
  const auto home = *served.worker;
  // The home worker holds nothing any more (its engine evicted the blocks),
  // and is a little busier than the others.
  fleet.worker(home).load().request_started();
  auto next = fleet.decide(prompt_of(480), "s");
  ASSERT_TRUE(next.worker);
  EXPECT_NE(*next.worker, home);
  EXPECT_EQ(next.reason, Reason::moved_evicted);
  fleet.worker(home).load().request_finished();
}

TEST(Router, ASessionMovesToAWorkerHoldingMoreOfItsPrompt) {
  Fleet fleet(cache_aware());
  auto first = prompt_of(320);
  auto served = fleet.turn(first, "s");
  const auto home = *served.worker;
  const auto other = (home + 1) % 3;
  fleet.hold(home, first, 19);
  auto second = prompt_of(960);
  fleet.hold(other, second, 59);  // another conversation left all of it there
  auto next = fleet.decide(second, "s");
  EXPECT_EQ(next.worker, other);
  EXPECT_EQ(next.reason, Reason::moved_better_prefix);
}

TEST(Router, ASessionOnADownWorkerMovesAsUnhealthy) {
  Fleet fleet(cache_aware());
  auto first = prompt_of(320);
  auto served = fleet.turn(first, "s");
  const auto home = *served.worker;
  fleet.hold(home, first, 19);
  workers::HealthThresholds thresholds{1, 1};
  fleet.worker(home).health().record_check(false, thresholds);
  ASSERT_FALSE(fleet.worker(home).health().healthy());
  auto next = fleet.decide(prompt_of(480), "s");
  ASSERT_TRUE(next.worker);
  EXPECT_NE(*next.worker, home);
  EXPECT_EQ(next.reason, Reason::moved_unhealthy);
}

TEST(Router, AnEjectedWorkerIsNotACandidateUnlessAllAre) {
  Fleet fleet(cache_aware());
  auto prompt = prompt_of(320);
  fleet.hold(1, prompt, 19);  // b holds the prompt
  const workers::EjectionOptions eject_at_once{1, 60'000, 60'000};
  fleet.worker(1).breaker().record_traffic(workers::FailureCause::status_5xx, kNow, eject_at_once);
  auto decision = fleet.decide(prompt, std::nullopt);
  ASSERT_TRUE(decision.worker);
  EXPECT_NE(*decision.worker, 1u);
  EXPECT_EQ(decision.candidates[1].ineligible_because, policy::Ineligible::ejected);
  // Every worker ejected: panic mode routes as if none were.
  fleet.worker(0).breaker().record_traffic(workers::FailureCause::connect, kNow, eject_at_once);
  fleet.worker(2).breaker().record_traffic(workers::FailureCause::timeout, kNow, eject_at_once);
  auto panic = fleet.decide(prompt, std::nullopt);
  EXPECT_EQ(panic.worker, 1u);
  // The ejection ends by itself.
  EXPECT_EQ(fleet.decide(prompt, std::nullopt, 0, kNow + 60'000).worker, 1u);
}

TEST(Router, AnIdleSessionComesBackAsExpired) {
  Fleet fleet(cache_aware());
  auto first = prompt_of(320);
  fleet.turn(first, "s", kNow);
  auto later = fleet.decide(prompt_of(480), "s", 0, kNow + 31 * 60 * 1000);
  EXPECT_EQ(later.reason, Reason::session_expired);
  auto soon = fleet.decide(prompt_of(480), "s", 0, kNow + 60 * 1000);
  EXPECT_NE(soon.reason, Reason::session_expired);
}

TEST(Router, RequestsWithoutASessionKeepThePolicysReason) {
  Fleet fleet(policy::make_round_robin());
  auto decision = fleet.decide(prompt_of(64), std::nullopt, 4);
  EXPECT_EQ(decision.reason, Reason::round_robin);
  EXPECT_EQ(decision.worker, 1u);  // 4 % 3
  EXPECT_FALSE(decision.session);
}

TEST(Router, ARetryIsARetryWhateverTheSession) {
  Fleet fleet(cache_aware());
  std::vector<std::size_t> tried{0};
  auto prompt = prompt_of(64);
  auto decision = fleet.router.decide(fleet.table, fleet.model, &prompt, {"s", 0, tried, kNow});
  ASSERT_TRUE(decision.worker);
  EXPECT_NE(*decision.worker, 0u);
  EXPECT_EQ(decision.reason, Reason::retry);
}

TEST(Router, NamesTheRunnerUpAndTheExpectedTtftGap) {
  Fleet fleet(cache_aware());
  auto prompt = prompt_of(1'000);
  fleet.hold(2, prompt, 40);  // 640 cached on c
  fleet.hold(0, prompt, 20);  // 320 cached on a
  auto decision = fleet.decide(prompt, std::nullopt);
  ASSERT_EQ(decision.worker, 2u);
  ASSERT_EQ(decision.runner_up, 0u);
  // a: 680 uncached (68 ms); c: 360 uncached (36 ms).
  EXPECT_NEAR(decision.gap_ms, 32.0, 1e-9);
  EXPECT_EQ(route_receipt(fleet.model, decision),
            "worker=c; reason=best_cost; predicted_cached=640; runner_up=a; gap_ms=32.0");
}

// Two cache_aware workers with a drift window of 8 (4 samples at least);
// the first holds 39 blocks (624 tokens) of a 640-token prompt.
struct HeldPrompt {
  static config::Options small_drift_window() {
    config::Options options;
    options.routing.drift.window = 8;
    options.routing.drift.min_samples = 4;
    return options;
  }
  HeldPrompt() { fleet.hold(0, prompt, 39); }
  Fleet fleet{cache_aware(), 2, small_drift_window()};
  prompt::PreparedPrompt prompt = prompt_of(640);
};

// Another gateway's request took the blocks between the decision and the
// prefill: the engine's eviction events explain the miss, so the index is
// still trusted. Evictions no larger than what the request itself had to
// make room for explain nothing.
TEST(Router, MissesTheEnginesEvictionsExplainDoNotMarkDrift) {
  HeldPrompt held;
  auto& fleet = held.fleet;
  const auto& prompt = held.prompt;
  auto& evicted = fleet.worker(0).event_stream().evicted_blocks;
  auto miss = [&](std::uint64_t blocks_evicted_meanwhile) {
    auto decision = fleet.decide(prompt, std::nullopt);
    EXPECT_EQ(decision.worker, 0u);
    evicted += blocks_evicted_meanwhile;
    // 624 promised, nothing delivered; the request computed 640 prompt and
    // 32 answer tokens (43 blocks with the partial one).
    ResponseOutcome outcome{200, 0, 0u, 640u, 5.0};
    outcome.completion_tokens = 32;
    fleet.serve(decision, prompt, 0, outcome);
  };
  for (int request = 0; request < 16; ++request) {
    miss(43 + 39);  // its own 43 blocks and the 39 it was promised
  }
  EXPECT_FALSE(fleet.worker(0).costs().drifting());
  EXPECT_EQ(fleet.worker(0).costs().drift_evidence().samples, 0u);
  for (int request = 0; request < 3; ++request) {
    miss(43 + 38);  // one block short of explaining the miss
    EXPECT_FALSE(fleet.worker(0).costs().drifting());
  }
  miss(43 + 38);
  EXPECT_TRUE(fleet.worker(0).costs().drifting());
}

TEST(Router, ADriftingWorkersIndexIsNotCredited) {
  HeldPrompt held;
  auto& fleet = held.fleet;
  const auto& prompt = held.prompt;
  auto trusted = fleet.decide(prompt, std::nullopt);
  ASSERT_EQ(trusted.worker, 0u);
  EXPECT_EQ(trusted.predicted_cached_tokens, 624u);
  // The engine keeps reporting nothing cached where the index says 624.
  for (int request = 0; request < 4; ++request) {
    fleet.serve(trusted, prompt, 0, {200, 0, 0u, 640u, 5.0});
  }
  ASSERT_TRUE(fleet.worker(0).costs().drifting());
  auto distrusted = fleet.decide(prompt, std::nullopt, 1);
  EXPECT_EQ(distrusted.candidates[0].cached_tokens, 0u);
  EXPECT_TRUE(distrusted.candidates[0].drifting);
  EXPECT_EQ(distrusted.predicted_cached_tokens, 0u);  // whichever it picked, nothing is credited
  EXPECT_EQ(distrusted.reason, Reason::best_cost_no_cache);
  auto on_a = fleet.decide(prompt, std::nullopt, 0);
  if (on_a.worker == 0u) {
    EXPECT_EQ(on_a.indexed_cached_tokens, 624u);  // the index's own claim is still reported
  }
  // The engine agrees again: the worker is credited again.
  for (int request = 0; request < 8 && fleet.worker(0).costs().drifting(); ++request) {
    fleet.serve(trusted, prompt, 0, {200, 0, 624u, 640u, 5.0});
  }
  EXPECT_FALSE(fleet.worker(0).costs().drifting());
  EXPECT_EQ(fleet.decide(prompt, std::nullopt, 2).worker, 0u);
}

// Every worker's requests teach the model's pooled fit; each worker learns
// how much slower or faster it runs than that. By default the policy prices
// a worker at the priors times its speed over the median (relative), or
// (pooled) at the pooled fit times its speed, or at its own fit. Worker a
// answers twice as slowly as b and c for the same prompts.
TEST(Router, EachWorkersSpeedIsLearnedAgainstThePooledFitAndPriced) {
  Fleet fleet(cache_aware());
  ASSERT_EQ(fleet.table.options->routing.cache_aware.prefill_fit, config::PrefillFitScope::relative);
  for (std::uint32_t request = 0; request < 120; ++request) {
    const std::uint32_t length = 500 + (request % 8) * 250;
    const auto worker = request % 3;
    const double ttft = 0.1 * length * (worker == 0 ? 2.0 : 1.0);
    auto prompt = prompt_of(length);
    auto decision = fleet.decide(prompt, std::nullopt, request);
    fleet.serve(decision, prompt, worker, {200, 0, 0u, length, ttft, true});
  }
  EXPECT_EQ(fleet.model.pooled_prefill->rates().samples, 120u);
  EXPECT_GT(fleet.worker(0).costs().prefill_speed() / fleet.worker(1).costs().prefill_speed(), 1.5);
  EXPECT_NEAR(fleet.worker(1).costs().prefill_speed(), fleet.worker(2).costs().prefill_speed(), 0.05);
  // A cold prompt: in every mode a's prefill is priced at about twice b's,
  // so it goes to b or c.
  for (auto scope :
       {config::PrefillFitScope::relative, config::PrefillFitScope::pooled, config::PrefillFitScope::per_worker}) {
    config::Options options;
    use_linear_priors(options);
    options.routing.cache_aware.prefill_fit = scope;
    fleet.table.options = std::make_shared<config::Options>(options);
    auto decision = fleet.decide(prompt_of(2'000), std::nullopt, 999);
    EXPECT_NE(decision.worker, 0u) << static_cast<int>(scope);
    EXPECT_GT(decision.candidates[0].prefill_ms / decision.candidates[1].prefill_ms, 1.5) << static_cast<int>(scope);
  }
  // Relative: b and c, the median, are priced at the priors exactly.
  config::Options relative;
  use_linear_priors(relative);
  fleet.table.options = std::make_shared<config::Options>(relative);
  auto decision = fleet.decide(prompt_of(2'000), std::nullopt, 999);
  const policy::PrefillRates priors{relative.routing.cache_aware.prefill_ms_per_token,
                                    relative.routing.cache_aware.prefill_ms_per_token_pair,
                                    relative.routing.cache_aware.prefill_base_ms};
  const double median_prefill = priors.prefill_ms(2'000, 0);
  EXPECT_NEAR(std::min(decision.candidates[1].prefill_ms, decision.candidates[2].prefill_ms), median_prefill,
              0.05 * median_prefill);
}

TEST(Router, OutcomesCompleteTheSessionsTurn) {
  Fleet fleet(cache_aware());
  auto prompt = prompt_of(320);
  RouteContext context{"s", 0, {}, kNow};
  auto decision = fleet.router.decide(fleet.table, fleet.model, &prompt, context);
  auto attempt = fleet.router.commit(fleet.table, fleet.model, decision, &prompt, context);
  attempt.end(AttemptEnd::served, workers::FailureCause::none, kNow);
  attempt.complete({200, 0, 0u, 320u, 7.5});
  attempt.complete({200, 0, 0u, 320u, 7.5});  // recorded once, however often reported
  auto detail = fleet.sessions.detail("s", kNow);
  ASSERT_TRUE(detail);
  ASSERT_EQ(detail->turns.size(), 1u);
  EXPECT_EQ(detail->turns[0].status, 200);
  EXPECT_EQ(detail->turns[0].cached_tokens, 0u);
  EXPECT_EQ(detail->turns[0].ttft_ms, 7.5);
  EXPECT_EQ(detail->turns[0].reason, Reason::new_session);
  auto metrics = fleet.exposition();
  EXPECT_NE(metrics.find("kvgate_cache_predictions_total{outcome=\"exact\",worker=\"" +
                         fleet.worker(*decision.worker).id() + "\"} 1"),
            std::string::npos);
  EXPECT_NE(metrics.find("kvgate_prompt_tokens_total{model=\"m\",worker=\"" + fleet.worker(*decision.worker).id() +
                         "\"} 320"),
            std::string::npos);
}

// A token-grained engine (llama.cpp's slots) reports within a block of the
// block-grained prediction either way: that is exact; a block-cache
// worker's figure must match.
// Each request for an adapter is counted on its worker by where the adapter
// stood there; base-model requests are not. One LoRA slot per worker.
TEST(Router, AdapterPlacementsAreCountedByWhereTheAdapterStood) {
  Fleet fleet(cache_aware(), 1);
  fleet.model.adapters = {"sql", "support"};
  for (const auto& name : fleet.model.adapters) {
    fleet.model.adapter_hashes.push_back(workers::adapter_hash(name));
  }
  fleet.model.max_loras = 1;
  auto sql = prompt_of(64, 1);
  sql.adapter = 0;
  auto support = prompt_of(64, 100);
  support.adapter = 1;
  EXPECT_EQ(fleet.turn(sql, "s1", kNow).candidates[0].adapter, policy::AdapterState::loadable);
  EXPECT_EQ(fleet.turn(sql, "s1", kNow + 1).candidates[0].adapter, policy::AdapterState::resident);
  EXPECT_EQ(fleet.turn(support, "s2", kNow + 2).candidates[0].adapter, policy::AdapterState::evicts);
  fleet.turn(prompt_of(64, 200), "s3", kNow + 3);
  const auto metrics = fleet.exposition();
  for (const auto& [state, count] : {std::pair{"resident", 1}, {"loadable", 1}, {"evicts", 1}, {"waiting", 0}}) {
    EXPECT_NE(metrics.find(std::string(R"(kvgate_adapter_placements_total{model="m",state=")") + state +
                           R"(",worker="a"} )" + std::to_string(count) + "\n"),
              std::string::npos)
        << state << "\n"
        << metrics;
  }
}

TEST(Router, ATokenGrainedEngineWithinABlockEitherWayIsExact) {
  Fleet fleet(cache_aware(), 2);
  fleet.model.workers[0].options.cache_model = config::CacheModel::sequences;
  auto prompt = prompt_of(800);
  fleet.hold(0, prompt, 48);  // 768 tokens
  fleet.hold(1, prompt, 48);
  auto decision = fleet.decide(prompt, std::nullopt);
  ASSERT_EQ(decision.indexed_cached_tokens, 768u);
  fleet.serve(decision, prompt, 0, {200, 0, 757u, 800u, 10.0});  // 11 below
  fleet.serve(decision, prompt, 0, {200, 0, 779u, 800u, 10.0});  // 11 above
  fleet.serve(decision, prompt, 1, {200, 0, 757u, 800u, 10.0});
  const auto metrics = fleet.exposition();
  EXPECT_NE(metrics.find(R"(kvgate_cache_predictions_total{outcome="exact",worker="a"} 2)"), std::string::npos)
      << metrics;
  EXPECT_NE(metrics.find(R"(kvgate_cache_predictions_total{outcome="over",worker="b"} 1)"), std::string::npos);
  EXPECT_EQ(fleet.worker(0).costs().drift_evidence().over_predicted, 0u);
}

// A worker's drift names what is likely wrong, from what its engine said.
TEST(Router, TheDriftCauseNamesTheEngineItDetected) {
  Fleet fleet(cache_aware(), 1);
  auto& route = fleet.model.workers[0];
  workers::EngineIdentity identity;
  identity.kind = config::EngineKind::llamacpp;
  identity.evidence = "/metrics names (llamacpp:*)";
  route.state->engine().publish_identity(std::make_shared<const workers::EngineIdentity>(identity));
  EXPECT_NE(likely_drift_cause(fleet.model, route).find("the engine is llama.cpp"), std::string::npos);
  route.options.cache_model = config::CacheModel::sequences;
  route.options.slots = 2;
  EXPECT_NE(likely_drift_cause(fleet.model, route).find("slots 2, from /props"), std::string::npos);
  identity.kind = config::EngineKind::vllm;
  route.state->engine().publish_identity(std::make_shared<const workers::EngineIdentity>(identity));
  EXPECT_NE(likely_drift_cause(fleet.model, route).find("not llama-server"), std::string::npos);
  route.options.cache_model = config::CacheModel::blocks;
  auto scrape = std::make_shared<workers::EngineView::Scrape>();
  scrape->load.block_size = 32;
  route.state->engine().publish(scrape);
  EXPECT_NE(likely_drift_cause(fleet.model, route).find("set block_size: 32"), std::string::npos);
}

// A hybrid-attention model: a worker whose local group lacks the window
// before its full-attention run is credited with no hit, whatever that run;
// a configured layout the events contradict is named as the drift cause.
TEST(Router, AHybridModelsHitNeedsTheLocalGroupsWindow) {
  Fleet fleet(cache_aware(), 2);
  fleet.model.cache->attention.configure({prefix::AttentionKind::sliding_window, 64});
  auto prompt = prompt_of(800);
  fleet.hold(0, prompt, 48);  // routed there: both groups
  fleet.model.cache->index.insert(fleet.model.workers[1].slot, std::span(prompt.blocks).first(48), index::Tier::gpu,
                                  0);  // the full-attention group only
  auto decision = fleet.decide(prompt, std::nullopt);
  EXPECT_EQ(decision.candidates[0].cached_tokens, 768u);
  EXPECT_EQ(decision.candidates[1].cached_tokens, 0u);
  ASSERT_EQ(decision.worker, 0u);
  EXPECT_EQ(decision.full_attention_cached_tokens, 768u);
  auto& route = fleet.model.workers[0];
  EXPECT_NE(likely_drift_cause(fleet.model, route).find("without KV events the index models the sliding_window 64"),
            std::string::npos)
      << likely_drift_cause(fleet.model, route);
  fleet.model.cache->attention.report({prefix::AttentionKind::sliding_window, 128});
  EXPECT_NE(likely_drift_cause(fleet.model, route)
                .find("models[].attention says sliding_window 64 but the engines' KV events report sliding_window 128"),
            std::string::npos)
      << likely_drift_cause(fleet.model, route);
}

TEST(Router, AMoveIsCountedOnCommitOnly) {
  Fleet fleet(cache_aware());
  auto first = prompt_of(320);
  auto served = fleet.turn(first, "s");
  fleet.worker(*served.worker).load().prefill_added(100'000);
  auto second = prompt_of(480);
  ASSERT_EQ(fleet.decide(second, "s").reason, Reason::moved_evicted);
  EXPECT_EQ(fleet.metrics.serialize().find("kvgate_session_moves_total{"), std::string::npos);
  fleet.turn(second, "s");
  EXPECT_NE(fleet.metrics.serialize().find("kvgate_session_moves_total{model=\"m\",reason=\"moved_evicted\"} 1"),
            std::string::npos);
  fleet.worker(*served.worker).load().prefill_answered(100'000);
}

TEST(Router, AMoveCountsThePrefillItAdded) {
  Fleet fleet(cache_aware());
  auto first = prompt_of(3'200);
  auto served = fleet.turn(first, "s");
  const auto home = *served.worker;
  fleet.hold(home, first, 199);
  fleet.worker(home).load().prefill_added(100'000);  // seconds of queue: the next turn moves
  auto moved = fleet.turn(prompt_of(3'520), "s");
  ASSERT_EQ(moved.reason, Reason::moved_queue);
  EXPECT_EQ(moved.best_cached_tokens, 3'184u);
  EXPECT_EQ(moved.predicted_cached_tokens, 0u);
  EXPECT_NE(fleet.metrics.serialize().find(
                "kvgate_session_move_prefill_tokens_total{model=\"m\",reason=\"moved_queue\"} 3184"),
            std::string::npos)
      << fleet.metrics.serialize();
  fleet.worker(home).load().prefill_answered(100'000);
}

// A moved turn is measured against staying: the previous worker's expected
// first token (calibrated) less the realized one, paid or lost.
TEST(Router, AMovesRealizedGainIsMeasuredAgainstStaying) {
  Fleet fleet(cache_aware());
  for (auto [key, realized] : {std::pair{"s1", 60.0}, std::pair{"s2", 2'000.0}}) {
    auto first = prompt_of(320);
    auto served = fleet.turn(first, key);
    const auto home = *served.worker;
    fleet.hold(home, first, 19);
    fleet.worker(home).load().prefill_added(10'000);  // 1 s queued
    auto next = prompt_of(480);
    RouteContext context{key, 0, {}, kNow};
    auto decision = fleet.router.decide(fleet.table, fleet.model, &next, context);
    ASSERT_EQ(decision.reason, Reason::moved_queue);
    ASSERT_GT(decision.candidates[home].expected_ttft_ms, 60);
    ASSERT_LT(decision.candidates[home].expected_ttft_ms, 2'000);
    auto attempt = fleet.router.commit(fleet.table, fleet.model, decision, &next, context);
    attempt.end(AttemptEnd::served, workers::FailureCause::none, kNow);
    attempt.complete({200, 0, 0u, 480u, realized, true});
    fleet.worker(home).load().prefill_answered(10'000);
  }
  const auto metrics = fleet.metrics.serialize();
  EXPECT_NE(metrics.find("kvgate_session_moves_measured_total{model=\"m\",outcome=\"paid\"} 1"), std::string::npos)
      << metrics;
  EXPECT_NE(metrics.find("kvgate_session_moves_measured_total{model=\"m\",outcome=\"lost\"} 1"), std::string::npos);
}

// A slot engine (cache_model sequences, 2 slots): requests that found a
// slot free teach how long one is held, requests sent while every slot was
// busy the wait per request ahead; the waiting ones do not teach the
// prefill cost. Slots held by requests the gateway does not track are
// priced as seen at no particular moment in their holds.
TEST(Router, ASlotWorkersWaitIsLearnedFromItsOutcomesAndPriced) {
  Fleet fleet(cache_aware(), 2);
  fleet.slot_engines(2);
  auto& a = fleet.worker(0);
  auto prompt = prompt_of(320);
  double priced_free = 0;
  for (int request = 0; request < 3; ++request) {
    auto decision = fleet.decide(prompt, std::nullopt, static_cast<std::uint64_t>(request));
    ASSERT_EQ(decision.candidates[0].requests_ahead, 0u);
    priced_free = decision.candidates[0].expected_ttft_ms;
    fleet.serve(decision, prompt, 0, {200, 0, 0u, 320u, 32.0, true, 10u, 968.0});
  }
  EXPECT_DOUBLE_EQ(a.costs().ms_per_request_ahead(), 500);  // a 1 s hold over 2 slots
  // Their first tokens against their price at the priors set a's level.
  EXPECT_DOUBLE_EQ(a.costs().slot_free_level().value_or(0), 32.0 / priced_free);
  EXPECT_DOUBLE_EQ(fleet.decide(prompt, std::nullopt, 5).candidates[0].expected_ttft_ms, 32.0);
  const auto prefill_samples = a.costs().prefill_rates().samples;
  // Two in flight on a's two slots: one ahead of a free slot.
  a.load().request_started();
  a.load().request_started();
  auto busy = fleet.decide(prompt, std::nullopt, 10);
  EXPECT_EQ(busy.candidates[0].requests_ahead, 1u);
  EXPECT_DOUBLE_EQ(busy.candidates[0].slot_wait_ms, policy::unseen_remaining_hold_ms(std::array{1'000.0}));
  EXPECT_EQ(busy.worker, 1u);
  // Each waited 300 ms beyond its price.
  for (int request = 0; request < 3; ++request) {
    auto decision = fleet.decide(prompt, std::nullopt, 20 + static_cast<std::uint64_t>(request));
    const auto& priced = decision.candidates[0];
    const double realized = priced.expected_ttft_ms - priced.slot_wait_ms + 300;
    fleet.serve(decision, prompt, 0, {200, 0, 0u, 320u, realized, true, 10u, 968.0});
  }
  EXPECT_DOUBLE_EQ(a.costs().ms_per_request_ahead(), 300);
  EXPECT_EQ(a.costs().prefill_rates().samples, prefill_samples);
  a.load().request_finished();
  a.load().request_finished();
  // A continuous-batching worker has no slots: nothing is ahead.
  fleet.model.workers[1].options.cache_model = config::CacheModel::blocks;
  fleet.worker(1).load().request_started();
  fleet.worker(1).load().request_started();
  fleet.worker(1).load().request_started();
  EXPECT_EQ(fleet.decide(prompt, std::nullopt, 31).candidates[1].requests_ahead, 0u);
}

// A slot worker priced high by its own free-slot answers (a warm-up under
// other contention) and then never chosen would keep that price for good:
// once the other workers have taught a window of free-slot answers since
// its last, it is priced at most at the fleet's median level, gets a
// request while the others are busy, and its answer makes its level its
// own again.
TEST(Router, AnIdleSlotWorkersStaleLevelIsPricedAtTheFleetsAndRelearned) {
  Fleet fleet(cache_aware(), 3);
  fleet.slot_engines(2);
  auto prompt = prompt_of(320);
  auto serve_free = [&](std::size_t worker, double realized_over_price, std::uint64_t sequence) {
    auto decision = fleet.decide(prompt, std::nullopt, sequence);
    const double price = decision.candidates[worker].expected_ttft_ms;
    fleet.serve(decision, prompt, worker, {200, 0, 0u, 320u, price * realized_over_price, true, 10u, 968.0});
  };
  std::uint64_t sequence = 0;
  // a's first answers were slow; b and c answer at the priors.
  for (int request = 0; request < 3; ++request) {
    serve_free(0, 6.0, ++sequence);
    serve_free(1, 1.0, ++sequence);
    serve_free(2, 1.0, ++sequence);
  }
  const double a_level = fleet.worker(0).costs().slot_free_level().value_or(0);
  const double b_level = fleet.worker(1).costs().slot_free_level().value_or(0);
  ASSERT_GT(a_level, 3 * b_level);
  // b and c busy on one slot each: a is still priced above them.
  fleet.worker(1).load().request_started();
  fleet.worker(2).load().request_started();
  auto busy = fleet.decide(prompt, std::nullopt, ++sequence);
  EXPECT_NE(busy.worker, 0u);
  // A window of free-slot answers elsewhere: a's level is stale.
  fleet.worker(1).load().request_finished();
  fleet.worker(2).load().request_finished();
  for (std::size_t request = 0; request < policy::SlotWaitFit::kWindow; ++request) {
    serve_free(1 + request % 2, 1.0, ++sequence);
  }
  fleet.worker(1).load().request_started();
  fleet.worker(2).load().request_started();
  auto stale = fleet.decide(prompt, std::nullopt, ++sequence);
  EXPECT_EQ(stale.worker, 0u);
  EXPECT_LT(stale.candidates[0].expected_ttft_ms, busy.candidates[0].expected_ttft_ms);
  EXPECT_DOUBLE_EQ(fleet.worker(0).costs().slot_free_level().value_or(0), a_level);  // its own is kept
  // Its answer there (slow again) makes its level its own: priced above the
  // others again.
  fleet.worker(1).load().request_finished();
  fleet.worker(2).load().request_finished();
  serve_free(0, 6.0, ++sequence);
  fleet.worker(1).load().request_started();
  fleet.worker(2).load().request_started();
  EXPECT_NE(fleet.decide(prompt, std::nullopt, ++sequence).worker, 0u);
}

// The wait for a busy slot is forecast from how long the requests the
// gateway sent there have held their slots: a worker whose requests are
// near their ends is cheaper to wait for than one whose requests just
// started, though both have the same requests ahead.
TEST(Router, ABusySlotIsPricedByHowLongItsRequestsHaveHeldIt) {
  Fleet fleet(cache_aware(), 2);
  fleet.slot_engines(2);
  auto prompt = prompt_of(320);
  // Holds of 1 s on both workers, measured from each slot's start.
  for (std::size_t worker = 0; worker < 2; ++worker) {
    for (std::uint64_t request = 0; request < 3; ++request) {
      auto decision = fleet.decide(prompt, std::nullopt, request);
      decision.worker = worker;
      RouteContext context{std::nullopt, request, {}, kNow};
      auto attempt = fleet.router.commit(fleet.table, fleet.model, decision, &prompt, context);
      attempt.engine_done(kNow + 1'000);
      attempt.end(AttemptEnd::served, workers::FailureCause::none, kNow + 1'000);
      attempt.complete({200, 0, 0u, 320u, 32.0, true, 10u, 968.0});
    }
  }
  // a's two requests started 900 ms ago, b's 100 ms ago.
  std::vector<Attempt> running;
  for (const auto& [worker, started] :
       {std::pair{0u, kNow}, std::pair{0u, kNow}, std::pair{1u, kNow + 800}, std::pair{1u, kNow + 800}}) {
    auto decision = fleet.decide(prompt, std::nullopt, 10);
    decision.worker = worker;
    RouteContext context{std::nullopt, 10, {}, started};
    running.push_back(fleet.router.commit(fleet.table, fleet.model, decision, &prompt, context));
  }
  const auto busy = fleet.decide(prompt, std::nullopt, 20, kNow + 900);
  EXPECT_EQ(busy.candidates[0].requests_ahead, 1u);
  EXPECT_EQ(busy.candidates[1].requests_ahead, 1u);
  EXPECT_DOUBLE_EQ(busy.candidates[0].slot_wait_ms, 100);
  EXPECT_DOUBLE_EQ(busy.candidates[1].slot_wait_ms, 900);
  EXPECT_DOUBLE_EQ(busy.candidates[0].slot_forecast_ms, 100);
  EXPECT_EQ(busy.worker, 0u);
  // Requests that then waited twice the forecast correct it (and, never
  // given a slot here, teach no hold).
  for (std::uint64_t request = 0; request < 3; ++request) {
    auto waited = fleet.decide(prompt, std::nullopt, 60 + request, kNow + 900);
    waited.worker = 0;
    const auto& priced = waited.candidates[0];
    const double realized = priced.expected_ttft_ms - priced.slot_wait_ms + 2 * priced.slot_forecast_ms;
    RouteContext context{std::nullopt, 60 + request, {}, kNow + 900};
    auto attempt = fleet.router.commit(fleet.table, fleet.model, waited, &prompt, context);
    attempt.end(AttemptEnd::served, workers::FailureCause::none, kNow + 900);
    attempt.complete({200, 0, 0u, 320u, realized, true, 10u, 968.0});
  }
  EXPECT_DOUBLE_EQ(fleet.worker(0).costs().slot_forecast_scale(), 2);
  EXPECT_EQ(fleet.worker(0).costs().slot_wait_status().hold_samples, 3u);
  // A third request on a is deferred: the next one waits for a's second
  // release, as b's first.
  auto decision = fleet.decide(prompt, std::nullopt, 30, kNow + 900);
  decision.worker = 0;
  RouteContext context{std::nullopt, 30, {}, kNow + 900};
  running.push_back(fleet.router.commit(fleet.table, fleet.model, decision, &prompt, context));
  const auto deeper = fleet.decide(prompt, std::nullopt, 40, kNow + 900);
  EXPECT_EQ(deeper.candidates[0].requests_ahead, 2u);
  EXPECT_DOUBLE_EQ(deeper.candidates[0].slot_forecast_ms, 100);
  EXPECT_DOUBLE_EQ(deeper.candidates[0].slot_wait_ms, 200);
  // One of a's ends at kNow + 1'000: the deferred request takes its slot.
  running[0].engine_done(kNow + 1'000);
  running[0].end(AttemptEnd::served, workers::FailureCause::none, kNow + 1'000);
  const auto later = fleet.decide(prompt, std::nullopt, 50, kNow + 1'100);
  EXPECT_EQ(later.candidates[0].requests_ahead, 1u);
  EXPECT_DOUBLE_EQ(later.candidates[0].slot_wait_ms, 0);  // the other holder is past every recent hold
  for (auto& attempt : running) {
    attempt.end(AttemptEnd::served, workers::FailureCause::none, kNow + 1'200);
  }
}

// A request the gateway saw wait for a slot (deferred at its dispatch,
// given a slot by a tracked release) teaches the wait it had, not its
// first token less a prefill price that may be off; and what it took from
// that release to its first token teaches the worker's price level, so a
// worker busy enough that every request waits still learns it.
TEST(Router, AMeasuredWaitTeachesTheWaitAndThePriceLevelApart) {
  Fleet fleet(cache_aware(), 2);
  fleet.slot_engines(2);
  auto prompt = prompt_of(320);
  auto& a = fleet.worker(0);
  // Holds of 1 s on a, measured from each slot's start.
  for (std::uint64_t request = 0; request < 3; ++request) {
    auto decision = fleet.decide(prompt, std::nullopt, request);
    decision.worker = 0;
    RouteContext context{std::nullopt, request, {}, kNow};
    auto attempt = fleet.router.commit(fleet.table, fleet.model, decision, &prompt, context);
    attempt.engine_done(kNow + 1'000);
    attempt.end(AttemptEnd::served, workers::FailureCause::none, kNow + 1'000);
    attempt.complete({200, 0, 0u, 320u, 32.0, true, 10u, 968.0});
  }
  const auto free_samples = a.costs().slot_wait_status().free_samples;
  double forecast_ms = 0;
  double prefill_priced_ms = 0;
  for (std::uint64_t round = 0; round < 3; ++round) {
    const std::uint64_t start = kNow + 10'000 * (round + 1);
    // Two holders take a's slots; a third request is deferred behind them.
    std::vector<Attempt> holders;
    for (std::uint64_t holder = 0; holder < 2; ++holder) {
      auto decision = fleet.decide(prompt, std::nullopt, 100 + round * 10 + holder, start);
      decision.worker = 0;
      RouteContext context{std::nullopt, 100 + round * 10 + holder, {}, start};
      holders.push_back(fleet.router.commit(fleet.table, fleet.model, decision, &prompt, context));
    }
    auto waiting = fleet.decide(prompt, std::nullopt, 200 + round, start + 100);
    waiting.worker = 0;
    const auto& priced = waiting.candidates[0];
    ASSERT_EQ(priced.requests_ahead, 1u);
    forecast_ms = priced.slot_forecast_ms;
    prefill_priced_ms = priced.expected_ttft_ms - priced.slot_wait_ms;
    RouteContext context{std::nullopt, 200 + round, {}, start + 100};
    auto waiter = fleet.router.commit(fleet.table, fleet.model, waiting, &prompt, context);
    // The first holder ends 500 ms after the waiter's dispatch: it takes
    // the slot then, and its first token comes a quarter of its priced
    // prefill later.
    holders[0].engine_done(start + 600);
    holders[0].end(AttemptEnd::served, workers::FailureCause::none, start + 600);
    const double ttft = 500 + prefill_priced_ms / 4;
    waiter.first_token(ttft / 1e3);
    waiter.engine_done(start + 1'600);
    waiter.end(AttemptEnd::served, workers::FailureCause::none, start + 1'600);
    waiter.complete({200, 0, 0u, 320u, ttft, true, 10u, 1'000.0 - ttft});
    holders[1].end(AttemptEnd::served, workers::FailureCause::none, start + 1'700);
  }
  const auto status = a.costs().slot_wait_status();
  EXPECT_EQ(status.wait_samples, 3u);
  EXPECT_DOUBLE_EQ(a.costs().ms_per_request_ahead(), 500);
  EXPECT_DOUBLE_EQ(a.costs().slot_forecast_scale(), 500 / forecast_ms);
  // Each waiter's first token from its release joined the level.
  EXPECT_EQ(status.free_samples, free_samples + 3);
}

// admission.hold_slots: a slot engine's slot that a session's turn freed
// is kept for the session's next turn when its conversations come back
// sooner than the history takes to compute again; meanwhile other
// sessions' requests find the worker full, the session's own turn does
// not, and the hold ends when the turn comes or its time is up.
TEST(Router, ASlotEngineKeepsAFreedSlotForItsSessionsNextTurn) {
  config::Options options;
  options.admission.hold_slots = true;
  Fleet fleet(cache_aware(), 2, options);
  fleet.slot_engines(1);
  auto prompt = prompt_of(3'200);  // 320 ms to compute whole
  auto other = prompt_of(3'200, 1'000);
  const auto key = slot_hold_key("s");
  auto& gaps = *fleet.model.session_gaps;
  auto first_turn = [&](std::uint64_t sequence) {
    RouteContext context{"s", sequence, {}, kNow};
    auto decision = fleet.router.decide(fleet.table, fleet.model, &prompt, context);
    decision.worker = 0;
    auto attempt = fleet.router.commit(fleet.table, fleet.model, decision, &prompt, context);
    attempt.engine_done(kNow + 500, {200, 3'200u, 32u, 0u});
    attempt.end(AttemptEnd::served, workers::FailureCause::none, kNow + 500);
  };
  // Before the think times are learned, nothing is kept.
  first_turn(1);
  EXPECT_FALSE(fleet.worker(0).load().slot_holds().kept_for(key, kNow + 501));
  // Nine turns in ten followed by another within 100 ms of the answer.
  for (int turn = 0; turn < 100; ++turn) {
    if (turn % 10 == 0) {
      gaps.record_first_turn();
    } else {
      gaps.record_next_turn(500);
      gaps.record_think(40);
    }
  }
  first_turn(2);
  EXPECT_TRUE(fleet.worker(0).load().slot_holds().kept_for(key, kNow + 501));
  // Another session's request finds a's one slot kept; so does a request
  // without a session.
  const auto elsewhere = fleet.decide(other, "t", 3, kNow + 510);
  EXPECT_FALSE(elsewhere.candidates[0].eligible);
  EXPECT_EQ(elsewhere.worker, 1u);
  EXPECT_FALSE(fleet.decide(other, std::nullopt, 4, kNow + 510).candidates[0].eligible);
  // The session's next turn, 40 ms after its answer, is let in and takes
  // the hold wherever it goes.
  const auto think_before = gaps.counts().think[0];
  RouteContext second{"s", 5, {}, kNow + 540};
  auto next = fleet.router.decide(fleet.table, fleet.model, &prompt, second);
  EXPECT_TRUE(next.candidates[0].eligible);
  next.worker = 0;
  auto attempt = fleet.router.commit(fleet.table, fleet.model, next, &prompt, second);
  EXPECT_FALSE(fleet.worker(0).load().slot_holds().kept_for(key, kNow + 540));
  EXPECT_EQ(gaps.counts().think[0], think_before + 1);
  const auto metrics = fleet.exposition();
  EXPECT_NE(metrics.find("kvgate_slot_holds_total{model=\"m\",outcome=\"kept\"} 1"), std::string::npos) << metrics;
  EXPECT_NE(metrics.find("kvgate_slot_holds_total{model=\"m\",outcome=\"used\"} 1"), std::string::npos) << metrics;
  // Its answer keeps the slot again, for the bucket's 100 ms: then it is
  // anyone's.
  attempt.engine_done(kNow + 1'000, {200, 3'200u, 32u, 3'100u});
  attempt.end(AttemptEnd::served, workers::FailureCause::none, kNow + 1'000);
  EXPECT_FALSE(fleet.decide(other, "t", 6, kNow + 1'099).candidates[0].eligible);
  EXPECT_TRUE(fleet.decide(other, "t", 7, kNow + 1'100).candidates[0].eligible);
  // A worker modelled with llama-server's RAM prompt cache keeps nothing,
  // and takes requests beyond its slots: its engine restores a taken
  // slot's history at the conversation's next turn.
  fleet.model.workers[0].options.cache_ram_mib = 8'192;
  RouteContext third{"s", 8, {}, kNow + 1'200};
  auto again = fleet.router.decide(fleet.table, fleet.model, &prompt, third);
  again.worker = 0;
  auto last = fleet.router.commit(fleet.table, fleet.model, again, &prompt, third);
  EXPECT_TRUE(fleet.decide(other, "t", 9, kNow + 1'210).candidates[0].eligible);
  last.engine_done(kNow + 1'500, {200, 3'200u, 32u, 3'100u});
  last.end(AttemptEnd::served, workers::FailureCause::none, kNow + 1'500);
  EXPECT_FALSE(fleet.worker(0).load().slot_holds().kept_for(key, kNow + 1'501));
}

// The index writer as the router sees it: each call recorded.
class RecordingIndexWriter final : public kv_events::IndexWriter {
 public:
  struct Call {
    std::string kind;
    kv_events::WorkerSlot slot;
    std::vector<prefix::BlockHash> blocks;
    std::uint64_t ticket;
    std::optional<std::uint32_t> reported_blocks = std::nullopt;
  };
  void assume(const std::shared_ptr<kv_events::ModelCache>&, kv_events::WorkerSlot slot,
              std::span<const prefix::BlockHash> blocks, std::uint64_t ticket) override {
    calls.push_back({"assume", slot, {blocks.begin(), blocks.end()}, ticket});
  }
  void withdraw(const std::shared_ptr<kv_events::ModelCache>&, kv_events::WorkerSlot slot,
                std::span<const prefix::BlockHash> blocks, std::uint64_t ticket) override {
    calls.push_back({"withdraw", slot, {blocks.begin(), blocks.end()}, ticket});
  }
  void finish(const std::shared_ptr<kv_events::ModelCache>&, kv_events::WorkerSlot slot, std::uint64_t ticket,
              std::optional<std::uint32_t> reported_blocks) override {
    calls.push_back({"finish", slot, {}, ticket, reported_blocks});
  }
  bool settle(std::chrono::milliseconds) override { return true; }
  std::vector<Call> calls;
};

// The attempt owns what the commit changed, with its own copy of the
// blocks: the prompt may be gone by the time the attempt ends.
TEST(Attempt, NotRunWithdrawsTheInsertWithItsOwnCopyOfTheBlocks) {
  Fleet fleet(cache_aware());
  RecordingIndexWriter writer;
  fleet.router.set_index_writer(&writer);
  std::optional<Attempt> attempt;
  std::vector<prefix::BlockHash> expected;
  {
    auto prompt = prompt_of(320, 7);
    expected = prompt.blocks;
    RouteContext context{std::nullopt, 41, {}, kNow};
    auto decision = fleet.router.decide(fleet.table, fleet.model, &prompt, context);
    attempt.emplace(fleet.router.commit(fleet.table, fleet.model, decision, &prompt, context));
  }
  const auto worker = attempt->worker_index();
  EXPECT_EQ(fleet.worker(worker).load().in_flight(), 1u);
  ASSERT_EQ(writer.calls.size(), 1u);
  EXPECT_EQ(writer.calls[0].kind, "assume");
  EXPECT_EQ(writer.calls[0].ticket, 41u);
  attempt->end(AttemptEnd::not_run, workers::FailureCause::connect, kNow);
  EXPECT_EQ(fleet.worker(worker).load().in_flight(), 0u);
  ASSERT_EQ(writer.calls.size(), 2u);
  EXPECT_EQ(writer.calls[1].kind, "withdraw");
  EXPECT_EQ(writer.calls[1].blocks, expected);
  EXPECT_EQ(writer.calls[1].ticket, 41u);
  EXPECT_EQ(writer.calls[1].slot, fleet.model.workers[worker].slot);
  attempt->end(AttemptEnd::served, workers::FailureCause::none, kNow);  // a second end changes nothing
  EXPECT_EQ(writer.calls.size(), 2u);
}

// The cluster as the router sees it: each call recorded.
class RecordingPeerPublisher final : public PeerPublisher {
 public:
  void turn(std::string_view model, std::string_view key, std::string_view, const PeerTurn& turn, bool retry) override {
    calls.push_back("turn " + std::string(model) + " " + std::string(key) + " #" + std::to_string(turn.number) +
                    " on " + std::string(turn.worker) + (retry ? " retry" : ""));
  }
  void outcome(std::string_view, std::string_view key, std::uint64_t number,
               const SessionTable::Outcome& outcome) override {
    calls.push_back("outcome " + std::string(key) + " #" + std::to_string(number) + " cached " +
                    std::to_string(outcome.cached_tokens.value_or(0)));
  }
  void assumed(std::string_view, std::string_view worker, std::span<const std::uint64_t> blocks,
               std::uint64_t ticket) override {
    calls.push_back("assumed " + std::string(worker) + " " + std::to_string(blocks.size()) + " blocks ticket " +
                    std::to_string(ticket));
  }
  void withdrawn(std::string_view, std::string_view worker, std::span<const std::uint64_t> blocks,
                 std::uint64_t ticket) override {
    calls.push_back("withdrawn " + std::string(worker) + " " + std::to_string(blocks.size()) + " blocks ticket " +
                    std::to_string(ticket));
  }
  void finished(std::string_view, std::string_view worker, std::uint64_t ticket) override {
    calls.push_back("finished " + std::string(worker) + " ticket " + std::to_string(ticket));
  }
  void learned(std::string_view, std::string_view worker, const CostSample& sample) override {
    calls.push_back("learned " + std::string(worker) + " cached " + std::to_string(sample.cached_tokens.value_or(0)) +
                    " of " + std::to_string(sample.prompt_tokens.value_or(0)));
    samples.emplace_back(std::string(worker), sample);
  }
  void answered(std::string_view key, std::uint64_t number, std::optional<std::uint32_t> answer_tokens) override {
    calls.push_back("answered " + std::string(key) + " #" + std::to_string(number) + " " +
                    (answer_tokens ? std::to_string(*answer_tokens) : std::string("?")) + " tokens");
  }
  std::vector<std::string> calls;
  std::vector<std::pair<std::string, CostSample>> samples;
};

// A cluster's replicas hear of every change the commit makes and the
// attempt undoes or completes, in order, by worker id and the replica's
// own ticket.
TEST(Router, TellsItsPeersWhatItCommitsAndHowItEnds) {
  Fleet fleet(cache_aware());
  RecordingIndexWriter writer;
  RecordingPeerPublisher peers;
  fleet.router.set_index_writer(&writer);
  fleet.router.set_peer_publisher(&peers);
  auto prompt = prompt_of(320, 7);
  fleet.hold(1, prompt, 20);
  {
    RouteContext context{"s", 41, {}, kNow};
    auto decision = fleet.router.decide(fleet.table, fleet.model, &prompt, context);
    ASSERT_EQ(decision.worker, 1u);
    auto attempt = fleet.router.commit(fleet.table, fleet.model, decision, &prompt, context);
    attempt.end(AttemptEnd::served, workers::FailureCause::none, kNow);
    ResponseOutcome outcome;
    outcome.status = 200;
    outcome.cached_tokens = 304;
    outcome.prompt_tokens = 320;
    attempt.complete(outcome);
  }
  {
    RouteContext context{"s", 42, {}, kNow};
    auto decision = fleet.router.decide(fleet.table, fleet.model, &prompt, context);
    auto attempt = fleet.router.commit(fleet.table, fleet.model, decision, &prompt, context);
    attempt.end(AttemptEnd::not_run, workers::FailureCause::connect, kNow);
  }
  EXPECT_EQ(peers.calls, (std::vector<std::string>{"assumed b 20 blocks ticket 41", "turn m s #1 on b",
                                                   "learned b cached 304 of 320", "outcome s #1 cached 304",
                                                   "assumed b 20 blocks ticket 42", "turn m s #2 on b",
                                                   "withdrawn b 20 blocks ticket 42"}));
}

// A session's answer read whole is told to the peers with its length: a
// slot engine's next turn, on whichever replica, expects the slot to hold
// it (ASlotEnginesNextTurnExpectsThePreviousAnswerToo).
TEST(Router, TellsItsPeersHowLongASessionsAnswerWas) {
  Fleet fleet(cache_aware());
  fleet.slot_engines(2);
  RecordingPeerPublisher peers;
  fleet.router.set_peer_publisher(&peers);
  auto prompt = prompt_of(330);
  RouteContext context{std::string_view("s"), 0, {}, kNow};
  auto decision = fleet.router.decide(fleet.table, fleet.model, &prompt, context);
  auto attempt = fleet.router.commit(fleet.table, fleet.model, decision, &prompt, context);
  attempt.engine_done(kNow + 5, {200, 330, 32});
  attempt.end(AttemptEnd::served, workers::FailureCause::none, kNow + 6);
  // A request outside any session has no answer to tell.
  auto other = fleet.router.decide(fleet.table, fleet.model, &prompt, {std::nullopt, 0, {}, kNow});
  auto unsessioned = fleet.router.commit(fleet.table, fleet.model, other, &prompt, {std::nullopt, 0, {}, kNow});
  unsessioned.engine_done(kNow + 7, {200, 330, 16});
  const auto answered = std::count_if(peers.calls.begin(), peers.calls.end(),
                                      [](const std::string& call) { return call.starts_with("answered"); });
  EXPECT_EQ(answered, 1);
  EXPECT_NE(std::find(peers.calls.begin(), peers.calls.end(), "answered s #1 32 tokens"), peers.calls.end());
}

// What the cluster's other replicas have in flight on a worker is priced
// like this replica's own: the decision moves off a worker they load.
TEST(Router, PricesThePeersRequestsInFlight) {
  Fleet fleet(cache_aware());
  auto prompt = prompt_of(320, 7);
  const auto alone = fleet.decide(prompt, std::nullopt);
  ASSERT_TRUE(alone.worker);
  workers::LoadCounters::PeerCounts busy;
  busy.in_flight = 6;
  busy.pending_prefill_tokens = 20'000;
  busy.pending_requests = 6;
  busy.active_tokens = 20'000;
  fleet.worker(*alone.worker).load().set_peer_counts(busy);
  const auto shared = fleet.decide(prompt, std::nullopt);
  ASSERT_TRUE(shared.worker);
  EXPECT_NE(*shared.worker, *alone.worker);
  EXPECT_EQ(shared.candidates[*alone.worker].in_flight, 6u);
  EXPECT_EQ(fleet.worker(*alone.worker).load().in_flight(), 0u);  // its own count is untouched
}

// A disaggregated model: a, b decode; c, d prefill.
void make_disaggregated(Fleet& fleet, std::uint32_t local_prefill_tokens = 256) {
  fleet.model.disaggregation =
      ModelRoute::Disaggregation{config::DisaggregationProtocol::vllm, local_prefill_tokens, 0.7, 0.001};
  fleet.model.workers[2].options.role = config::WorkerRole::prefill;
  fleet.model.workers[3].options.role = config::WorkerRole::prefill;
  fleet.model.workers[0].options.role = config::WorkerRole::decode;
  fleet.model.workers[1].options.role = config::WorkerRole::decode;
}

TEST(Disaggregated, TheDecoderIsChosenFirstAndALongUncachedPromptPrefillsRemotely) {
  Fleet fleet(cache_aware(), 4);
  make_disaggregated(fleet);
  RecordingIndexWriter writer;
  fleet.router.set_index_writer(&writer);
  auto prompt = prompt_of(4'000, 1);
  fleet.hold(2, prompt, 200);  // c, a prefill worker, holds most of it: never the decoder
  RouteContext context{"s1", 9, {}, kNow};
  auto decision = fleet.router.decide(fleet.table, fleet.model, &prompt, context);
  ASSERT_TRUE(decision.worker);
  EXPECT_LT(*decision.worker, 2u);
  EXPECT_EQ(decision.candidates[2].ineligible_because, policy::Ineligible::prefill_only);
  ASSERT_TRUE(decision.prefill);
  EXPECT_EQ(decision.prefill->reason, Reason::remote_prefill);
  ASSERT_TRUE(decision.prefill_worker());
  EXPECT_EQ(*decision.prefill_worker(), 2u);  // c: its cache shortens the prefill
  EXPECT_NE(route_receipt(fleet.model, decision).find("prefill=remote_prefill; prefill_worker=c"), std::string::npos);
  EXPECT_NE(explain_text(fleet.model, decision).find("prefill: remote_prefill on c"), std::string::npos);

  auto attempt = fleet.router.commit(fleet.table, fleet.model, decision, &prompt, context);
  const auto decoder = *decision.worker;
  // The prefill worker carries the pending prefill; the decoder only decodes.
  EXPECT_EQ(fleet.worker(2).load().in_flight(), 1u);
  EXPECT_EQ(fleet.worker(2).load().pending_prefill_tokens(), 4'000u - 200 * 16);
  EXPECT_EQ(fleet.worker(decoder).load().pending_prefill_tokens(), 0u);
  // The prefill worker is assumed to hold the prompt at once; the decoder
  // once the prefill has answered.
  ASSERT_EQ(writer.calls.size(), 1u);
  EXPECT_EQ(writer.calls[0].slot, fleet.model.workers[2].slot);
  // The session remembers both.
  auto session = fleet.sessions.find("s1", kNow);
  ASSERT_TRUE(session);
  EXPECT_EQ(session->worker, fleet.worker(decoder).id());

  // The prefill worker failed: its counts and insert go, the decoder's stay.
  attempt.end_prefill(AttemptEnd::not_run, workers::FailureCause::reset, kNow);
  EXPECT_EQ(fleet.worker(2).load().in_flight(), 0u);
  EXPECT_EQ(fleet.worker(decoder).load().in_flight(), 1u);
  ASSERT_EQ(writer.calls.size(), 2u);
  EXPECT_EQ(writer.calls[1].kind, "withdraw");
  EXPECT_EQ(writer.calls[1].slot, fleet.model.workers[2].slot);
  attempt.end(AttemptEnd::not_run, std::nullopt, kNow);
  EXPECT_EQ(fleet.worker(decoder).load().in_flight(), 0u);
  EXPECT_EQ(writer.calls.size(), 2u);  // the decoder never had an insert to withdraw

  // A prefill that answered: the decoder is assumed to hold the prompt.
  auto served = fleet.router.commit(fleet.table, fleet.model, decision, &prompt, {"s1", 11, {}, kNow});
  served.end_prefill(AttemptEnd::served, workers::FailureCause::none, kNow);
  ASSERT_EQ(writer.calls.size(), 4u);
  EXPECT_EQ(writer.calls[3].kind, "assume");
  EXPECT_EQ(writer.calls[3].slot, fleet.model.workers[decoder].slot);
  served.end(AttemptEnd::served, workers::FailureCause::none, kNow);

  // Retried without c: d prefills.
  std::vector<std::size_t> tried{2};
  RouteContext retry{"s1", 10, tried, kNow};
  auto again = fleet.router.decide(fleet.table, fleet.model, &prompt, retry);
  ASSERT_TRUE(again.prefill_worker());
  EXPECT_EQ(*again.prefill_worker(), 3u);
}

TEST(Disaggregated, ADecoderHoldingTheHistoryPrefillsTheNewTurnItself) {
  Fleet fleet(cache_aware(), 4);
  make_disaggregated(fleet);
  auto prompt = prompt_of(4'000, 1);
  fleet.hold(1, prompt, 240);  // b holds all but the last few blocks
  auto decision = fleet.decide(prompt, "s2");
  ASSERT_TRUE(decision.worker);
  EXPECT_EQ(*decision.worker, 1u);
  ASSERT_TRUE(decision.prefill);
  EXPECT_EQ(decision.prefill->reason, Reason::local_prefill);
  EXPECT_FALSE(decision.prefill_worker());
  auto attempt = fleet.router.commit(fleet.table, fleet.model, decision, &prompt, {"s2", 0, {}, kNow});
  EXPECT_EQ(fleet.worker(1).load().pending_prefill_tokens(), 4'000u - 240 * 16);
  EXPECT_FALSE(attempt.prefill_worker_index());
}

TEST(Disaggregated, ObservedHandOversReplaceTheConfiguredLinkOnceThereAreEnough) {
  Fleet fleet(cache_aware(), 4);
  make_disaggregated(fleet);
  auto prompt = prompt_of(4'000, 1);
  auto decision = fleet.decide(prompt, std::nullopt);
  ASSERT_TRUE(decision.prefill);
  EXPECT_EQ(decision.prefill->transfer_source, policy::TransferSource::configured);
  EXPECT_DOUBLE_EQ(decision.prefill->transfer_ms_per_token, 0.001);
  EXPECT_NE(prefill_json(decision).dump().find(R"("transfer_source":"configured")"), std::string::npos);
  // A slower hand-over than the link promised: 4,000 tokens in 40 ms.
  for (std::uint32_t sample = 0; sample + 1 < workers::LearnedTransfer::kMinSamples; ++sample) {
    fleet.model.transfer->observe(4'000, 40);
  }
  EXPECT_EQ(fleet.decide(prompt, std::nullopt).prefill->transfer_source, policy::TransferSource::configured);
  fleet.model.transfer->observe(4'000, 40);
  decision = fleet.decide(prompt, std::nullopt);
  ASSERT_TRUE(decision.prefill);
  EXPECT_EQ(decision.prefill->transfer_source, policy::TransferSource::learned);
  EXPECT_DOUBLE_EQ(decision.prefill->transfer_ms_per_token, 0.01);
  for (const auto& candidate : decision.prefill->candidates) {
    EXPECT_DOUBLE_EQ(candidate.transfer_ms, (4'000 - decision.prefill->decoder_cached_tokens) * 0.01);
  }
}

TEST(Disaggregated, AModelWithoutRolesDecidesAsBefore) {
  Fleet fleet(cache_aware(), 4);
  auto prompt = prompt_of(4'000, 1);
  auto decision = fleet.decide(prompt, std::nullopt);
  EXPECT_FALSE(decision.prefill);
  EXPECT_EQ(route_receipt(fleet.model, decision).find("prefill"), std::string::npos);
}

TEST(Attempt, AnAttemptNeverEndedIsWithdrawnAndAMovedFromOneOwnsNothing) {
  Fleet fleet(cache_aware());
  RecordingIndexWriter writer;
  fleet.router.set_index_writer(&writer);
  auto prompt = prompt_of(320);
  RouteContext context{std::nullopt, 5, {}, kNow};
  auto decision = fleet.router.decide(fleet.table, fleet.model, &prompt, context);
  const auto worker = *decision.worker;
  {
    auto first = fleet.router.commit(fleet.table, fleet.model, decision, &prompt, context);
    Attempt moved(std::move(first));
    EXPECT_EQ(fleet.worker(worker).load().in_flight(), 1u);
  }  // `moved` withdraws once; `first` owns nothing
  EXPECT_EQ(fleet.worker(worker).load().in_flight(), 0u);
  EXPECT_EQ(fleet.worker(worker).load().pending_prefill_tokens(), 0u);
  ASSERT_EQ(writer.calls.size(), 2u);
  EXPECT_EQ(writer.calls[1].kind, "withdraw");
}

// A fleet of slot engines whose index writer records each call, and one
// request (ticket 9) committed there.
struct SlotEngineAttempt {
  SlotEngineAttempt() {
    for (auto& worker : fleet.model.workers) {
      worker.options.cache_model = config::CacheModel::sequences;
    }
    fleet.router.set_index_writer(&writer);
    decision = fleet.router.decide(fleet.table, fleet.model, &prompt, context);
    attempt.emplace(fleet.router.commit(fleet.table, fleet.model, decision, &prompt, context));
  }
  Fleet fleet{cache_aware()};
  RecordingIndexWriter writer;
  prompt::PreparedPrompt prompt = prompt_of(320);
  RouteContext context{std::nullopt, 9, {}, kNow};
  RouteDecision decision;
  std::optional<Attempt> attempt;
};

// Served on a worker that keeps whole prompts in slots: its slot is freed
// (finish), and the blocks stay assumed.
TEST(Attempt, ServedOnASlotWorkerFreesItsSlotAndKeepsTheBlocks) {
  SlotEngineAttempt served;
  served.attempt->end(AttemptEnd::served, workers::FailureCause::none, kNow);
  ASSERT_EQ(served.writer.calls.size(), 2u);
  EXPECT_EQ(served.writer.calls[1].kind, "finish");
  EXPECT_EQ(served.writer.calls[1].ticket, 9u);
}

// The engine's answer read whole frees the slot then, with no second
// finish at the attempt's end: the client's next turn, sent on the last
// byte, must find the slot free. A refused answer frees nothing early.
TEST(Attempt, AnAnswerReadWholeFreesItsSlotBeforeTheAttemptEnds) {
  SlotEngineAttempt answered;
  auto& writer = answered.writer;
  answered.attempt->engine_done(kNow + 5, {200, 320, 32, 100});
  ASSERT_EQ(writer.calls.size(), 2u);
  EXPECT_EQ(writer.calls[1].kind, "finish");
  EXPECT_EQ(writer.calls[1].reported_blocks, 6u);  // the engine's figure, in whole blocks
  answered.attempt->end(AttemptEnd::served, workers::FailureCause::none, kNow + 6);
  EXPECT_EQ(writer.calls.size(), 2u);

  SlotEngineAttempt refused;
  refused.attempt->engine_done(kNow + 5, {400, std::nullopt, std::nullopt});
  EXPECT_EQ(refused.writer.calls.size(), 1u);  // its assume only
  refused.attempt->end(AttemptEnd::not_run, workers::FailureCause::none, kNow + 6);
  ASSERT_EQ(refused.writer.calls.size(), 2u);
  EXPECT_EQ(refused.writer.calls[1].kind, "withdraw");
}

// A slot engine keeps the answer it generated after the prompt; the next
// turn repeats both, so its previous slot gives more than the index's
// whole blocks: the prompt's last partial block and as much of the answer
// as the engine's figures show such turns reuse.
TEST(Router, ASlotEnginesNextTurnExpectsThePreviousAnswerToo) {
  Fleet fleet(cache_aware());
  for (auto& worker : fleet.model.workers) {
    worker.options.cache_model = config::CacheModel::sequences;
  }
  std::uint32_t length = 330;  // 20 whole blocks and 10 tokens
  auto first = prompt_of(length);
  RouteContext context{std::string_view("s"), 0, {}, kNow};
  auto decision = fleet.router.decide(fleet.table, fleet.model, &first, context);
  ASSERT_TRUE(decision.worker);
  const auto worker = *decision.worker;
  auto attempt = fleet.router.commit(fleet.table, fleet.model, decision, &first, context);
  fleet.hold(worker, first, 20);
  auto second = prompt_of(length + 90);
  // Before the answer is read the next turn expects the whole blocks only.
  EXPECT_EQ(fleet.decide(second, "s").candidates[worker].cached_tokens, 320u);
  attempt.engine_done(kNow + 5, {200, length, 32});
  // Then the whole previous prompt; none of the answer before the engine
  // showed how much of one it reuses.
  auto next = fleet.decide(second, "s");
  EXPECT_EQ(next.worker, worker);
  EXPECT_EQ(next.indexed_cached_tokens, 330u);
  EXPECT_EQ(next.candidates[worker].cached_tokens, 330u);
  attempt.end(AttemptEnd::served, workers::FailureCause::none, kNow + 6);
  // The engine reuses a quarter of each answer (8 of 32 tokens): after
  // three such turns the next one expects that.
  for (int turn = 0; turn < 3; ++turn) {
    auto prompt = prompt_of(length + 90);
    RouteContext turn_context{std::string_view("s"), 0, {}, kNow + 10 + turn};
    auto routed = fleet.router.decide(fleet.table, fleet.model, &prompt, turn_context);
    ASSERT_EQ(routed.worker, worker);
    ASSERT_TRUE(routed.continuation);
    auto served = fleet.router.commit(fleet.table, fleet.model, routed, &prompt, turn_context);
    ResponseOutcome outcome;
    outcome.status = 200;
    outcome.cached_tokens = routed.continuation->previous_input_tokens + 8;
    outcome.prompt_tokens = prompt.input_tokens;
    served.engine_done(kNow + 11 + turn, {200, prompt.input_tokens, 32});
    served.end(AttemptEnd::served, workers::FailureCause::none, kNow + 11 + turn);
    served.complete(outcome);
    fleet.hold(worker, prompt, prompt.input_tokens / 16);
    length += 90;
    second = prompt_of(length + 90);
  }
  EXPECT_DOUBLE_EQ(fleet.worker(worker).costs().answer_reuse(), 0.25);
  next = fleet.decide(second, "s");
  EXPECT_EQ(next.indexed_cached_tokens, length + 8);
  // A block engine keeps blocks only.
  for (auto& route : fleet.model.workers) {
    route.options.cache_model = config::CacheModel::blocks;
  }
  EXPECT_EQ(fleet.decide(second, "s").indexed_cached_tokens, length / 16 * 16);
}

// Failures reported through attempts eject workers, but never more than
// max_ejected_percent of the model at once; a try that never reached its
// worker tells the breaker nothing.
TEST(Attempt, FailuresEjectWorkersUpToTheModelsCap) {
  config::Options options;
  options.outlier_detection.max_ejected_percent = 50;
  Fleet fleet(cache_aware(), 4, options);
  fleet.table.ejection = workers::EjectionOptions{1, 60'000, 60'000};
  auto prompt = prompt_of(320);
  auto fail_on = [&](std::size_t worker, std::optional<workers::FailureCause> traffic) {
    auto decision = fleet.decide(prompt, std::nullopt);
    decision.worker = worker;
    auto attempt = fleet.router.commit(fleet.table, fleet.model, decision, &prompt, {std::nullopt, 0, {}, kNow});
    attempt.end(AttemptEnd::not_run, traffic, kNow);
  };
  fail_on(0, std::nullopt);
  EXPECT_FALSE(fleet.worker(0).breaker().ejected(kNow));
  for (std::size_t worker = 0; worker < 4; ++worker) {
    fail_on(worker, workers::FailureCause::connect);
  }
  EXPECT_TRUE(fleet.worker(0).breaker().ejected(kNow));
  EXPECT_TRUE(fleet.worker(1).breaker().ejected(kNow));
  EXPECT_FALSE(fleet.worker(2).breaker().ejected(kNow));  // two of four is the cap
  EXPECT_FALSE(fleet.worker(3).breaker().ejected(kNow));
  EXPECT_EQ(routable_workers(fleet.model, kNow), 2u);
}

TEST(OutlierFilter, PanicModeLiftsEjectionsOnlyWhenNoHealthyWorkerIsLeft) {
  std::vector<policy::WorkerView> views(3);
  for (auto& view : views) {
    view.healthy = true;
    view.ejected = true;
  }
  views[2].healthy = false;
  views[2].ejected = false;  // down, not ejected: no help
  lift_ejections_in_panic(views);
  EXPECT_FALSE(views[0].ejected);
  EXPECT_FALSE(views[1].ejected);
  views[0].ejected = true;
  views[1].ejected = false;
  lift_ejections_in_panic(views);
  EXPECT_TRUE(views[0].ejected);  // b is still in routing
}

// The text a person reads: the worker, why, the runner-up and the gap, and
// one line per candidate with its prices.
TEST(Explain, TheTextNamesTheWorkerTheReasonTheRunnerUpAndEachCandidate) {
  Fleet fleet(cache_aware());
  auto prompt = prompt_of(640);
  fleet.hold(1, prompt, 39);
  fleet.turn(prompt, "s");
  fleet.worker(2).breaker().record_traffic(workers::FailureCause::status_5xx, kNow,
                                           workers::EjectionOptions{1, 60'000, 60'000});
  auto decision = fleet.decide(prompt_of(800), "s");
  ASSERT_EQ(decision.worker, 1u);
  const auto text = explain_text(fleet.model, decision);
  EXPECT_NE(text.find("worker b, because sticky (policy: best_cost)\n"), std::string::npos) << text;
  EXPECT_NE(text.find("session: turn 2, previous worker b\n"), std::string::npos) << text;
  EXPECT_NE(text.find("prompt: 800 tokens, 624 predicted cached on b\n"), std::string::npos) << text;
  EXPECT_NE(text.find("runner-up: a, its first token expected "), std::string::npos) << text;
  EXPECT_NE(text.find("  * b: 624, "), std::string::npos) << text;
  EXPECT_NE(text.find("    c: not eligible (ejected)\n"), std::string::npos) << text;
}

// A cluster's replica learns a worker's costs from another replica's
// answers exactly as from its own: the samples one router publishes, given
// to another replica's worker states, teach the same slot wait, TTFT
// calibration and prefill fit. A failed or retried answer teaches nothing.
TEST(Router, APeersCostSamplesTeachWhatItsOwnAnswersDo) {
  auto slot_fleet = [] {
    auto fleet = std::make_unique<Fleet>(cache_aware(), 2);
    fleet->slot_engines(2);
    return fleet;
  };
  auto serving = slot_fleet();
  auto peer = slot_fleet();
  RecordingPeerPublisher published;
  serving->router.set_peer_publisher(&published);
  auto prompt = prompt_of(320);
  for (int request = 0; request < 3; ++request) {
    auto decision = serving->decide(prompt, std::nullopt, static_cast<std::uint64_t>(request));
    serving->serve(decision, prompt, 0, {200, 0, 0u, 320u, 32.0, true, 10u, 968.0});
  }
  auto& a = serving->worker(0);
  a.load().request_started();
  a.load().request_started();
  for (int request = 0; request < 3; ++request) {
    auto decision = serving->decide(prompt, std::nullopt, 20 + static_cast<std::uint64_t>(request));
    const auto& priced = decision.candidates[0];
    serving->serve(decision, prompt, 0,
                   {200, 0, 0u, 320u, priced.expected_ttft_ms - priced.slot_wait_ms + 300, true, 10u, 968.0});
  }
  // Neither a failure nor a retry is a sample.
  auto failed = serving->decide(prompt, std::nullopt, 40);
  serving->serve(failed, prompt, 0, {500, 0, std::nullopt, std::nullopt, std::nullopt, false});
  auto retried = serving->decide(prompt, std::nullopt, 41);
  serving->serve(retried, prompt, 0, {200, 1, 0u, 320u, 5'000.0, true, 10u, 968.0});
  ASSERT_EQ(published.samples.size(), 6u);
  for (const auto& [worker, sample] : published.samples) {
    learn_costs(peer->model, peer->model.find_worker(worker), sample, peer->table.options->routing.cache_aware);
  }
  auto& b = peer->worker(0);
  EXPECT_DOUBLE_EQ(b.costs().ms_per_request_ahead(), 300);
  EXPECT_DOUBLE_EQ(b.costs().ms_per_request_ahead(), a.costs().ms_per_request_ahead());
  EXPECT_EQ(b.costs().ttft_recorded(), a.costs().ttft_recorded());
  EXPECT_EQ(b.costs().prefill_rates().samples, a.costs().prefill_rates().samples);
  EXPECT_EQ(b.costs().slot_wait_status().wait_samples, 3u);
}

}  // namespace
}  // namespace kvgate::route

namespace kvgate::route {
namespace {

// A request names an adapter as vLLM's clients do ("model": the adapter),
// or as SGLang's do: "lora_path" beside the base model, or "base:adapter".
TEST(RoutingTableServed, AnAdapterIsFoundByEachEnginesWayOfNamingIt) {
  RoutingTable table;
  table.models.emplace_back();
  table.models.back().name = "llama";
  table.models.back().adapters = {"sql", "support"};
  table.models.emplace_back();
  table.models.back().name = "qwen3:8b";  // a name with a colon of its own
  const auto& llama = table.models.front();
  EXPECT_EQ(table.find_served("llama").model, &llama);
  EXPECT_FALSE(table.find_served("llama").adapter);
  EXPECT_EQ(table.find_served("support").adapter, 1u);
  EXPECT_EQ(table.find_served("llama", std::string("sql")).adapter, 0u);
  EXPECT_EQ(table.find_served("llama:support").adapter, 1u);
  EXPECT_EQ(table.find_served("llama:support").model, &llama);
  EXPECT_EQ(table.find_served("qwen3:8b").model, &table.models.back());
  // Unknown adapters are never the base model.
  EXPECT_EQ(table.find_served("llama", std::string("ops")).model, nullptr);
  EXPECT_EQ(table.find_served("llama:ops").model, nullptr);
  EXPECT_EQ(table.find_served("qwen3:8b", std::string("sql")).model, nullptr);
}

}  // namespace
}  // namespace kvgate::route
