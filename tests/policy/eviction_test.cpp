#include <gtest/gtest.h>

#include "kvgate/policy/eviction.hpp"
#include "kvgate/policy/policy.hpp"

namespace kvgate::policy {
namespace {

TEST(AgeBuckets, DoubleFromTheBase) {
  EXPECT_EQ(age_bucket(0), 0u);
  EXPECT_EQ(age_bucket(99), 0u);
  EXPECT_EQ(age_bucket(100), 1u);
  EXPECT_EQ(age_bucket(199), 1u);
  EXPECT_EQ(age_bucket(200), 2u);
  EXPECT_EQ(age_bucket(1e12), kAgeBuckets - 1);
  EXPECT_EQ(age_bucket(-5), 0u);
  EXPECT_EQ(age_bucket(std::nan("")), 0u);
  for (std::size_t bucket = 0; bucket < kAgeBuckets; ++bucket) {
    EXPECT_EQ(age_bucket(age_bucket_low_ms(bucket)), bucket);
    EXPECT_EQ(age_bucket(age_bucket_typical_ms(bucket)), bucket);
  }
}

// Sessions whose turns come 0.4-0.8 s apart (one age bucket), nine turns in
// ten followed by another.
ReturnModel talkers() {
  AgeHistogram gaps{};
  gaps[age_bucket(600)] = 900;
  return {gaps, 1'000, 100};
}

TEST(ReturnModel, SaysNothingBeforeItHasLearned) {
  AgeHistogram gaps{};
  gaps[age_bucket(1'000)] = ReturnModel::kMinGaps - 1;
  ReturnModel few(gaps, 100, 10);
  EXPECT_FALSE(few.learned());
  EXPECT_EQ(few.probability(500, 10'000), 0);
  EXPECT_EQ(ReturnModel().probability(500, 10'000), 0);
}

TEST(ReturnModel, AConversationIdleShorterThanItsGapsLikelyReturnsALongIdleOneHasEnded) {
  const auto model = talkers();
  ASSERT_TRUE(model.learned());
  EXPECT_DOUBLE_EQ(model.continuation(), 0.9);
  EXPECT_DOUBLE_EQ(model.gap_cdf(300), 0);
  EXPECT_DOUBLE_EQ(model.gap_cdf(800), 1);
  // Idle 0.3 s, residency 10 s: every continuing session returns in time;
  // the 10% that ended do not.
  EXPECT_NEAR(model.probability(300, 10'000), 0.9, 1e-9);
  // Idle a minute: longer than any gap ever seen, so it has ended.
  EXPECT_EQ(model.probability(60'000, 10'000), 0);
  // A residency shorter than the gaps: part of the returns come too late.
  const double short_horizon = model.probability(300, 300);
  EXPECT_GT(short_horizon, 0);
  EXPECT_LT(short_horizon, 0.9);
  // Halfway through the gap distribution the ended sessions weigh more.
  const double halfway = model.probability(566, 10'000);
  EXPECT_GT(halfway, 0.7);
  EXPECT_LT(halfway, 0.9);
}

LruProfile full_cache(std::size_t bucket, std::uint64_t blocks) {
  LruProfile lru;
  lru.blocks[bucket] = blocks;
  lru.held_blocks = blocks;
  lru.capacity_blocks = blocks;
  return lru;
}

TEST(EvictionCost, NothingWhileTheNewBlocksFitInFreeMemory) {
  auto lru = full_cache(age_bucket(300), 1'000);
  lru.capacity_blocks = 1'200;
  const auto cost = eviction_cost(lru, 200, 0, std::nullopt, talkers(), 1.0);
  EXPECT_EQ(cost.blocks, 0u);
  EXPECT_EQ(cost.ms, 0);
  EXPECT_EQ(eviction_cost(full_cache(1, 10), 5, 0, std::nullopt, talkers(), 1.0).blocks, 5u);
  // An unknown capacity prices nothing (never guess low).
  lru.capacity_blocks = 0;
  EXPECT_EQ(eviction_cost(lru, 5'000, 0, std::nullopt, talkers(), 1.0).blocks, 0u);
}

TEST(EvictionCost, BlocksOfLiveConversationsCostTheirRePrefillThoseOfEndedOnesNothing) {
  const auto returns = talkers();
  // 300 blocks over the free ones, 2 ms each to recompute.
  auto live = full_cache(age_bucket(300), 1'000);
  auto ended = full_cache(age_bucket(120'000), 1'000);
  const auto live_cost = eviction_cost(live, 300, 0, std::nullopt, returns, 2.0);
  const auto ended_cost = eviction_cost(ended, 300, 0, std::nullopt, returns, 2.0);
  EXPECT_EQ(live_cost.blocks, 300u);
  EXPECT_EQ(ended_cost.blocks, 300u);
  // The live cache's residency is its blocks' own idle time (0.28 s), so
  // only the returns within it count.
  const double live_odds = returns.probability(age_bucket_typical_ms(age_bucket(300)), live_cost.horizon_ms);
  EXPECT_GT(live_odds, 0.3);
  EXPECT_NEAR(live_cost.ms, 300 * 2.0 * live_odds, 1e-6);
  EXPECT_EQ(ended_cost.ms, 0);
  // The oldest go first: a cache with both evicts the ended ones.
  auto mixed = live;
  mixed.blocks[age_bucket(120'000)] = 200;
  mixed.held_blocks = mixed.capacity_blocks = 1'200;
  const auto mixed_cost = eviction_cost(mixed, 300, 0, std::nullopt, returns, 2.0);
  EXPECT_NEAR(mixed_cost.ms, 100 * 2.0 * 0.9, 1e-6);
  // Unlearned returns price nothing, but the blocks are still counted.
  const auto unlearned = eviction_cost(live, 300, 0, std::nullopt, ReturnModel(), 2.0);
  EXPECT_EQ(unlearned.blocks, 300u);
  EXPECT_EQ(unlearned.ms, 0);
}

TEST(EvictionCost, RequestsAlreadyDispatchedEvictFirst) {
  const auto returns = talkers();
  auto lru = full_cache(age_bucket(120'000), 200);
  lru.blocks[age_bucket(300)] = 1'000;
  lru.capacity_blocks = 1'000;
  lru.held_blocks = 1'200;  // 200 assumed for requests not stored yet
  // Those 200 take the ended conversations' blocks; this placement's 100
  // come from the live ones.
  const auto cost = eviction_cost(lru, 100, 0, std::nullopt, returns, 1.0);
  EXPECT_EQ(cost.blocks, 100u);
  EXPECT_NEAR(cost.ms, 100 * 0.9, 1e-6);
}

TEST(EvictionCost, AReturningConversationDoesNotEvictItsOwnPrefix) {
  const auto returns = talkers();
  // The oldest blocks are this session's own (idle 0.6 s), which its new
  // turn reuses; the next oldest belong to others idle 0.3 s.
  auto lru = full_cache(age_bucket(600), 500);
  lru.blocks[age_bucket(300)] = 500;
  lru.held_blocks = lru.capacity_blocks = 1'000;
  const auto blind = eviction_cost(lru, 100, 0, std::nullopt, returns, 1.0);
  const auto own = eviction_cost(lru, 100, 500, 600.0, returns, 1.0);
  EXPECT_EQ(own.blocks, 100u);
  EXPECT_GT(own.ms, 0);
  // Blind, it would price evicting its own (older, less likely to return)
  // blocks; knowing them, it prices the others', within the residency its
  // own blocks show.
  EXPECT_NEAR(own.ms, 100 * 0.9, 1e-6);
  EXPECT_LT(blind.ms, own.ms);
}

// A session's prefix idle 0.6 s on a full worker: the requests dispatched
// there first evict the blocks older than it, then its own bucket's, its
// tail in proportion to its share of the bucket.
TEST(SurvivingBlocks, RequestsDispatchedAheadEvictOlderBlocksFirstThenThePrefixsTail) {
  auto lru = full_cache(age_bucket(600), 400);  // the prefix (200) and 200 others as old
  lru.blocks[age_bucket(60'000)] = 100;         // older
  lru.blocks[age_bucket(100)] = 500;            // younger
  lru.capacity_blocks = 1'000;
  lru.held_blocks = 1'000;
  EXPECT_EQ(surviving_blocks(lru, 200, 600), 200u);  // nothing ahead beyond memory
  lru.held_blocks = 1'100;                           // 100 ahead: the older ones go
  EXPECT_EQ(surviving_blocks(lru, 200, 600), 200u);
  lru.held_blocks = 1'200;  // 100 more: a quarter of the prefix's bucket
  EXPECT_EQ(surviving_blocks(lru, 200, 600), 150u);
  lru.held_blocks = 1'500;  // the whole bucket
  EXPECT_EQ(surviving_blocks(lru, 200, 600), 0u);
  // A younger prefix outlives the same queue: the 400 of 0.6 s go first.
  lru.held_blocks = 1'200;
  EXPECT_EQ(surviving_blocks(lru, 200, 100), 200u);
  // No ages published: no eviction order known, nothing is taken off.
  auto unaged = lru;
  unaged.blocks = {};
  EXPECT_EQ(surviving_blocks(unaged, 200, 600), 200u);
  // Unknown memory: nothing is taken off.
  lru.capacity_blocks = 0;
  EXPECT_EQ(surviving_blocks(lru, 200, 600), 200u);
}

// The policy: the session's previous worker holds its prefix, but the
// requests dispatched there will evict it before this turn runs; a worker
// that holds nothing but has room then costs less. Another worker holding
// the same prefix is not discounted (its age is not known).
TEST(CacheAware, ASessionsPrefixTheQueueAheadWillEvictIsPricedAsUncached) {
  constexpr PrefillRates kRates{0.1, 0, 0, 0, 0, 0.1};
  std::vector<WorkerView> workers{{"a", true, 0}, {"b", true, 0}};
  for (auto& worker : workers) {
    worker.prefill = kRates;
  }
  auto& home = workers[0];
  home.cached_tokens = 400 * 16;
  home.lru = full_cache(age_bucket(600), 400);
  home.lru.capacity_blocks = 1'000;
  home.lru.held_blocks = 1'400;  // 400 blocks of dispatched prompts not stored yet
  home.pending_prefill_tokens = 100;
  workers[1].lru.capacity_blocks = 1'000;  // empty
  RouteRequest request{"m", std::nullopt, 0, {}, 420 * 16};
  request.block_size = 16;
  request.previous_turn = RouteRequest::PreviousTurn{0, 600.0};
  CostModel cost;
  cost.queue_ms_per_request = 0;
  auto decision = make_cache_aware(cost)->decide(request, workers);
  EXPECT_EQ(decision.candidates[0].at_risk_tokens, 400u * 16);
  EXPECT_DOUBLE_EQ(decision.candidates[0].prefill_ms, kRates.prefill_ms(420 * 16, 0));
  EXPECT_EQ(decision.worker_index, 1u);
  // With room for what is dispatched, the prefix survives and keeps the turn.
  home.lru.held_blocks = 1'000;
  decision = make_cache_aware(cost)->decide(request, workers);
  EXPECT_EQ(decision.candidates[0].at_risk_tokens, 0u);
  EXPECT_EQ(decision.worker_index, 0u);
  // Not the previous worker: the same state is taken at the index's word.
  home.lru.held_blocks = 1'400;
  request.previous_turn = RouteRequest::PreviousTurn{1, 600.0};
  decision = make_cache_aware(cost)->decide(request, workers);
  EXPECT_EQ(decision.candidates[0].at_risk_tokens, 0u);
  EXPECT_EQ(decision.worker_index, 0u);
}

// The policy: two idle workers with full caches and nothing of the prompt;
// a's least recently used blocks belong to conversations idle 0.3 s (still
// going), b's to conversations idle two minutes (ended).
TEST(CacheAware, PlacesANewConversationWhereItEvictsWhatWillNotBeMissed) {
  constexpr PrefillRates kRates{0.1, 0, 0, 0, 0, 0.1};
  std::vector<WorkerView> workers{{"a", true, 0}, {"b", true, 0}};
  for (auto& worker : workers) {
    worker.prefill = kRates;
  }
  workers[0].lru = full_cache(age_bucket(300), 1'000);
  workers[1].lru = full_cache(age_bucket(120'000), 1'000);
  workers[0].indexed_blocks = 900;  // without the term, the tie rule would pick a
  workers[1].indexed_blocks = 1'000;
  const auto returns = talkers();
  RouteRequest request{"m", std::nullopt, 0, {}, 1'600};
  request.block_size = 16;
  request.returns = &returns;
  CostModel cost;
  cost.queue_ms_per_request = 0;
  auto decision = make_cache_aware(cost)->decide(request, workers);
  EXPECT_EQ(decision.worker_index, 1u);
  // 100 new blocks of 16 tokens at 0.1 ms, each as likely to be missed as
  // its owner is to return within a's residency.
  EXPECT_EQ(decision.candidates[0].evicted_blocks, 100u);
  const double odds =
      returns.probability(age_bucket_typical_ms(age_bucket(300)), age_bucket_typical_ms(age_bucket(300)));
  EXPECT_GT(odds, 0.3);
  EXPECT_NEAR(decision.candidates[0].evicts_ms, 100 * 16 * 0.1 * odds, 1e-6);
  EXPECT_EQ(decision.candidates[1].evicts_ms, 0);
  EXPECT_DOUBLE_EQ(decision.candidates[0].expected_ttft_ms, decision.candidates[1].expected_ttft_ms);
  // Off, the term is neither computed nor scored.
  cost.eviction_term = false;
  auto off = make_cache_aware(cost)->decide(request, workers);
  EXPECT_EQ(off.worker_index, 0u);
  EXPECT_LT(off.candidates[0].evicts_ms, 0);
  // The term prices what is destroyed; it does not outweigh a real hit: a
  // holds 1,200 of the prompt's tokens, which saves more than its evictions.
  cost.eviction_term = true;
  workers[0].cached_tokens = 1'200;
  EXPECT_EQ(make_cache_aware(cost)->decide(request, workers).worker_index, 0u);
}

// The session's previous turn names its worker by position: only that
// worker knows the oldest blocks are the conversation's own (reused, not
// evicted); an identical worker elsewhere prices them as another's.
TEST(CacheAware, OnlyTheSessionsOwnWorkerReusesItsIdlePrefix) {
  constexpr PrefillRates kRates{0.1, 0, 0, 0, 0, 0.1};
  auto lru = full_cache(age_bucket(600), 500);
  lru.blocks[age_bucket(300)] = 500;
  lru.held_blocks = lru.capacity_blocks = 1'000;
  std::vector<WorkerView> workers{{"a", true, 0}, {"b", true, 0}, {"c", true, 0}};
  for (auto& worker : workers) {
    worker.prefill = kRates;
    worker.lru = lru;
    worker.cached_tokens = 500 * 16;
  }
  const auto returns = talkers();
  RouteRequest request{"m", std::nullopt, 0, {}, 600 * 16 + 1};
  request.block_size = 16;
  request.returns = &returns;
  request.previous_turn = RouteRequest::PreviousTurn{1, 600.0};
  CostModel cost;
  cost.queue_ms_per_request = 0;
  const auto decision = make_cache_aware(cost)->decide(request, workers);
  const double ms_per_block = 16 * 0.1;
  const auto own = eviction_cost(lru, 100, 500, 600.0, returns, ms_per_block);
  const auto blind = eviction_cost(lru, 100, 500, std::nullopt, returns, ms_per_block);
  ASSERT_NE(own.ms, blind.ms);
  EXPECT_DOUBLE_EQ(decision.candidates[1].evicts_ms, own.ms);
  EXPECT_DOUBLE_EQ(decision.candidates[0].evicts_ms, blind.ms);
  EXPECT_DOUBLE_EQ(decision.candidates[2].evicts_ms, blind.ms);
}

// Lower tiers: a prefix held only in CPU memory is loaded, not computed, at
// the tier's load time per token (policy.hpp RouteRequest).
TEST(CacheAware, APrefixInALowerTierCostsItsLoadTimeInsteadOfItsPrefill) {
  constexpr PrefillRates kRates{0.1, 0, 0, 0, 0, 0.1};
  std::vector<WorkerView> workers{{"gpu", true, 0}, {"cpu", true, 0}, {"cold", true, 0}};
  for (auto& worker : workers) {
    worker.prefill = kRates;
  }
  workers[0].cached_tokens = 1'000;
  workers[1].cached_tokens = 1'000;
  workers[1].offloaded_cached_tokens = 1'000;
  RouteRequest request{"m", std::nullopt, 0, {}, 1'600};
  request.ms_per_offloaded_token = 0.005;  // 20x cheaper than computing
  CostModel cost;
  cost.queue_ms_per_request = 0;
  auto decision = make_cache_aware(cost)->decide(request, workers);
  EXPECT_EQ(decision.worker_index, 0u);
  EXPECT_DOUBLE_EQ(decision.candidates[0].receive_ms, 0);
  EXPECT_DOUBLE_EQ(decision.candidates[1].receive_ms, 5);
  EXPECT_EQ(decision.candidates[1].offloaded_cached_tokens, 1'000u);
  EXPECT_DOUBLE_EQ(decision.candidates[1].expected_ttft_ms, 60 + 5);
  EXPECT_DOUBLE_EQ(decision.candidates[2].expected_ttft_ms, 160);
  // 10 ms of queue on the GPU holder: loading from the CPU is faster.
  workers[0].pending_prefill_tokens = 100;
  EXPECT_EQ(make_cache_aware(cost)->decide(request, workers).worker_index, 1u);
  // A slow tier (0.2 ms per token, slower than computing) is worth less
  // than a cold worker, and the queued GPU holder wins again.
  request.ms_per_offloaded_token = 0.2;
  auto slow = make_cache_aware(cost)->decide(request, workers);
  EXPECT_EQ(slow.worker_index, 0u);
  EXPECT_DOUBLE_EQ(slow.candidates[1].expected_ttft_ms, 60 + 200);
  EXPECT_GT(slow.candidates[1].score, slow.candidates[2].score);
}

TEST(KvDemand, BeyondTheMemoryTheWaitTakesTheCachedPrefixThenTheWaitingRequestsPrefixes) {
  // 32,000 tokens of memory. Within it, nothing.
  EXPECT_EQ(kv_demand(32'000, 28'000, 4'000, 3'000).excess_tokens, 0u);
  EXPECT_EQ(kv_demand(32'000, 28'000, 4'000, 3'000).own_lost_tokens, 0u);
  // 1,000 beyond: that much of the cached prefix, nobody else's.
  auto partly = kv_demand(32'000, 29'000, 4'000, 3'000);
  EXPECT_EQ(partly.excess_tokens, 1'000u);
  EXPECT_EQ(partly.own_lost_tokens, 1'000u);
  EXPECT_EQ(partly.displaced_tokens, 0u);
  // 5,000 beyond: the whole prefix, and the 1,000 more this prompt adds
  // take the waiting requests' idle prefixes.
  auto over = kv_demand(32'000, 33'000, 4'000, 3'000);
  EXPECT_EQ(over.own_lost_tokens, 3'000u);
  EXPECT_EQ(over.displaced_tokens, 1'000u);
  // A new prompt on a worker already over its memory displaces as much as
  // it adds, not the excess that was there before it.
  auto fresh = kv_demand(32'000, 40'000, 4'000, 0);
  EXPECT_EQ(fresh.excess_tokens, 12'000u);
  EXPECT_EQ(fresh.displaced_tokens, 4'000u);
  // Memory unknown: nothing priced; a cached figure past the prompt is cut.
  EXPECT_EQ(kv_demand(0, 90'000, 4'000, 3'000).excess_tokens, 0u);
  EXPECT_EQ(kv_demand(32'000, 33'000, 4'000, 9'000).own_lost_tokens, 4'000u);
}

TEST(CacheAware, ATurnLeavesAWorkerWhosePromptsInFlightOverrunItsMemory) {
  // a holds 3,000 tokens of the 3,200-token prompt; both hold 2,000 blocks
  // of 16 tokens (32,000). a's prompts in flight decide.
  std::vector<WorkerView> workers{{"a", true, 0, 0, 3'000}, {"b", true, 0, 0, 0}};
  for (auto& worker : workers) {
    worker.prefill = PrefillRates{0.1, 0, 0, 0, 0, 0.1};
    worker.lru.capacity_blocks = 2'000;
  }
  RouteRequest request{"m", std::nullopt, 0, {}, 3'200};
  request.block_size = 16;
  CostModel cost;
  cost.queue_ms_per_request = 0;
  auto policy = make_cache_aware(cost);
  workers[0].active_tokens = 26'000;  // fits: the hit is a's
  auto fits = policy->decide(request, workers);
  EXPECT_EQ(fits.worker_index, 0u);
  EXPECT_EQ(fits.candidates[0].kv_excess_tokens, 0u);
  EXPECT_DOUBLE_EQ(fits.candidates[0].displaced_ms, 0);
  workers[0].active_tokens = 30'000;  // 1,200 beyond: part of the prefix, a still pays
  auto partly = policy->decide(request, workers);
  EXPECT_EQ(partly.worker_index, 0u);
  EXPECT_EQ(partly.candidates[0].at_risk_tokens, 1'200u);
  EXPECT_DOUBLE_EQ(partly.candidates[0].prefill_ms, 140);
  workers[0].active_tokens = 33'000;  // 4,200 beyond: the prefix is gone, and 200 more displaced
  auto over = policy->decide(request, workers);
  EXPECT_EQ(over.worker_index, 1u);
  EXPECT_EQ(over.candidates[0].kv_excess_tokens, 4'200u);
  EXPECT_DOUBLE_EQ(over.candidates[0].prefill_ms, 320);
  EXPECT_DOUBLE_EQ(over.candidates[0].displaced_ms, 20);
  EXPECT_DOUBLE_EQ(over.candidates[0].expected_ttft_ms, 320);  // displacing others is in the score only
  // A new conversation goes where it fits, even behind a queue.
  workers[0].cached_tokens = 0;
  workers[1].pending_prefill_tokens = 1'000;
  EXPECT_EQ(policy->decide(request, workers).worker_index, 1u);
  // Off with the eviction term: not computed.
  workers[0].cached_tokens = 3'000;
  workers[1].pending_prefill_tokens = 0;
  cost.eviction_term = false;
  auto off = make_cache_aware(cost)->decide(request, workers);
  EXPECT_EQ(off.worker_index, 0u);
  EXPECT_LT(off.candidates[0].displaced_ms, 0);
}

}  // namespace
}  // namespace kvgate::policy
