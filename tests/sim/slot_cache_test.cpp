#include "slot_cache.hpp"

#include <gtest/gtest.h>

#include <numeric>

#include "engine.hpp"

namespace kvgate::sim {
namespace {

std::vector<TokenId> tokens(std::initializer_list<std::pair<TokenId, std::size_t>> runs) {
  std::vector<TokenId> out;
  for (auto [first, length] : runs) {
    for (std::size_t index = 0; index < length; ++index) {
      out.push_back(first + static_cast<TokenId>(index));
    }
  }
  return out;
}

TEST(SlotCache, FirstRequestTakesTheLastSlotAsLlamaServerDoes) {
  SlotCache cache(3, 0.1);
  auto grant = cache.acquire(tokens({{1, 10}}));
  ASSERT_TRUE(grant);
  EXPECT_EQ(grant->slot, 2u);  // every slot unused: the LRU scan keeps the last tie
  EXPECT_EQ(grant->cached_tokens, 0u);
}

TEST(SlotCache, ReusesTheLongestCommonPrefixButAlwaysComputesTheLastToken) {
  SlotCache cache(2, 0.1);
  auto first = tokens({{1, 20}});
  auto grant = cache.acquire(first);
  cache.release(grant->slot, first, 1);
  auto extended = tokens({{1, 20}, {500, 5}});
  auto again = cache.acquire(extended);
  EXPECT_EQ(again->slot, grant->slot);
  EXPECT_EQ(again->cached_tokens, 20u);
  cache.release(again->slot, extended, 2);
  auto same = cache.acquire(extended);
  EXPECT_EQ(same->cached_tokens, 24u);  // the whole prompt matches: its last token is recomputed
}

TEST(SlotCache, BelowTheSimilarityThresholdTheLeastRecentlyUsedSlotIsTaken) {
  SlotCache cache(2, 0.5);
  auto a = tokens({{1, 10}});
  auto b = tokens({{100, 10}});
  auto slot_a = cache.acquire(a)->slot;  // slot 1
  auto slot_b = cache.acquire(b)->slot;  // slot 0
  cache.release(slot_a, a, 1);
  cache.release(slot_b, b, 2);
  // Shares 4 of 20 tokens with a: 0.2, under 0.5, so the LRU slot (a's) is
  // taken anyway, and its common prefix still counts.
  auto c = tokens({{1, 4}, {900, 16}});
  auto grant = cache.acquire(c);
  EXPECT_EQ(grant->slot, slot_a);
  EXPECT_EQ(grant->cached_tokens, 4u);
  // Shares 9 of 10 with b: above 0.5, so b's slot although it is newer.
  cache.release(grant->slot, c, 3);
  auto d = tokens({{100, 9}, {7000, 1}});
  EXPECT_EQ(cache.acquire(d)->slot, slot_b);
}

TEST(SlotCache, BusySlotsAreSkippedAndNoneIdleMeansWait) {
  SlotCache cache(2, 0.1);
  auto a = tokens({{1, 10}});
  auto first = cache.acquire(a);
  auto second = cache.acquire(a);  // the slot holding nothing yet is busy: the other one
  ASSERT_TRUE(second);
  EXPECT_NE(first->slot, second->slot);
  EXPECT_FALSE(cache.acquire(a));
  EXPECT_EQ(cache.busy(), 2u);
  cache.release(first->slot, a, 5);
  EXPECT_EQ(cache.acquire(a)->cached_tokens, 9u);
}

TEST(SlotCache, TheHostRamCacheKeepsAnOverwrittenSequenceAndRestoresIt) {
  SlotCache cache(1, 0.1, /*ram_tokens=*/80);
  auto a = tokens({{1, 40}});
  auto b = tokens({{1000, 40}});
  auto grant = cache.acquire(a);
  cache.release(grant->slot, a, 1);
  // b shares nothing with a: the slot is taken by LRU, a goes to RAM.
  grant = cache.acquire(b);
  EXPECT_EQ(grant->cached_tokens, 0u);
  EXPECT_EQ(cache.ram_sequences(), 1u);
  cache.release(grant->slot, b, 2);
  // a's next turn: below the similarity threshold against b, so LRU again;
  // b is saved and a restored from RAM.
  auto a2 = tokens({{1, 40}, {5000, 10}});
  grant = cache.acquire(a2);
  EXPECT_EQ(grant->cached_tokens, 40u);
  EXPECT_EQ(grant->restored_tokens, 40u);
  EXPECT_EQ(cache.ram_sequences(), 1u);  // b; a left it
  cache.release(grant->slot, a2, 3);
  // Beyond the limit the oldest saved sequences go (one always stays).
  auto c = tokens({{9000, 90}});
  grant = cache.acquire(c);
  EXPECT_EQ(cache.ram_sequences(), 1u);  // b (40) and a2 (50) exceed 80: b, the older, goes
  EXPECT_EQ(cache.ram_tokens(), 50u);
}

TEST(SlotCache, AnEmptySlotOrAMostlyKeptOneSavesNothing) {
  SlotCache cache(2, 0.1, 1000);
  auto a = tokens({{1, 40}});
  auto grant = cache.acquire(a);  // an empty slot: nothing to save
  EXPECT_EQ(cache.ram_sequences(), 0u);
  cache.release(grant->slot, a, 1);
  auto a2 = tokens({{1, 40}, {77, 20}});
  grant = cache.acquire(a2);  // by similarity, keeping all it held
  EXPECT_EQ(grant->cached_tokens, 40u);
  EXPECT_EQ(grant->restored_tokens, 0u);
  EXPECT_EQ(cache.ram_sequences(), 0u);
}

TEST(EngineSlots, DefersBeyondTheSlotsAndReportsTokenGrainedHits) {
  EngineLimits limits;
  limits.slots = 2;
  Engine engine(64, 4, limits, {});
  auto prompt = tokens({{1, 30}});
  engine.add({prompt, 2, 0});
  engine.add({tokens({{200, 30}}), 2, 0});
  engine.add({tokens({{1, 30}, {400, 3}}), 2, 0});
  auto report = engine.step();
  EXPECT_EQ(engine.running(), 2u);  // the third waits for a slot
  EXPECT_EQ(engine.waiting(), 1u);
  while (!engine.idle()) {
    for (const auto& progress : engine.step().progress) {
      if (progress.first_token && progress.request == 3) {
        // Its slot ran the first prompt plus one generated token: the
        // common prefix is the 30 prompt tokens, not a multiple of a block.
        EXPECT_EQ(progress.cached_tokens, 30u);
      }
    }
  }
  EXPECT_EQ(engine.counters().prefix_hit_tokens, 30u);
  EXPECT_TRUE(engine.pool().take_events().empty());  // llama.cpp publishes no KV events
  (void)report;
}

}  // namespace
}  // namespace kvgate::sim
