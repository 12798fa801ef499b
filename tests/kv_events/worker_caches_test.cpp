#include "kvgate/kv_events/worker_caches.hpp"

#include <gtest/gtest.h>

#include <numeric>

namespace kvgate::kv_events {
namespace {

constexpr std::uint32_t kBlockSize = 4;

std::vector<std::uint32_t> tokens(std::uint32_t first, std::size_t count) {
  std::vector<std::uint32_t> result(count);
  std::iota(result.begin(), result.end(), first);
  return result;
}

// What the request path computes for a prompt.
std::vector<BlockHash> request_blocks(const std::vector<std::uint32_t>& prompt, std::string_view salt = "") {
  return prefix::hash_blocks(prompt, kBlockSize, prefix::partition_seed({"model", "", salt}));
}

EventBatch batch(std::vector<Event> events) {
  EventBatch result;
  result.events = std::move(events);
  return result;
}

BlockStored stored(std::vector<EngineHash> hashes, std::optional<EngineHash> parent, std::vector<std::uint32_t> ids) {
  BlockStored event;
  event.block_hashes = std::move(hashes);
  event.parent_block_hash = parent;
  event.token_ids = std::move(ids);
  event.block_size = kBlockSize;
  return event;
}

class WorkerCachesTest : public ::testing::Test {
 protected:
  std::uint32_t held_blocks(WorkerSlot worker, const std::vector<std::uint32_t>& prompt, std::string_view salt = "") {
    return index.longest_prefix(request_blocks(prompt, salt)).blocks[worker];
  }

  index::PrefixIndex index{1'000'000};
  AttentionLayout attention;
  WorkerCaches caches{index, "model", CacheLimits{kBlockSize}, attention};
};

TEST_F(WorkerCachesTest, StoredBlocksChainFromTheirParentAndMatchTheRequestPath) {
  auto prompt = tokens(100, 12);
  caches.apply(0, batch({stored({11, 12}, std::nullopt, tokens(100, 8))}), 0);
  EXPECT_EQ(held_blocks(0, prompt), 2u);
  // The third block arrives later, chained from engine hash 12.
  auto stats = caches.apply(0, batch({stored({13}, 12, tokens(108, 4))}), 1);
  EXPECT_EQ(stats.stored_blocks, 1u);
  EXPECT_EQ(held_blocks(0, prompt), 3u);
  EXPECT_EQ(held_blocks(1, prompt), 0u);
}

TEST_F(WorkerCachesTest, RemovalUndoesAStoreAndCopiesCountSeparately) {
  auto prompt = tokens(100, 8);
  // vLLM can hold one hash in two physical blocks: two stores, two removals.
  caches.apply(0, batch({stored({21, 22}, std::nullopt, tokens(100, 8))}), 0);
  caches.apply(0, batch({stored({22}, 21, tokens(104, 4))}), 0);
  BlockRemoved removed;
  removed.block_hashes = {22};
  // Each removal frees a physical GPU block (what explains a missed
  // prediction, prediction_drift.hpp); an offloaded copy's does not.
  EXPECT_EQ(caches.apply(0, batch({removed}), 1).gpu_evicted_blocks, 1u);
  EXPECT_EQ(held_blocks(0, prompt), 2u);
  caches.apply(0, batch({removed}), 2);
  EXPECT_EQ(held_blocks(0, prompt), 1u);
  removed.block_hashes = {99};
  auto unknown = caches.apply(0, batch({removed}), 3);
  EXPECT_EQ(unknown.unknown_removals, 1u);
  EXPECT_EQ(unknown.gpu_evicted_blocks, 0u);
  auto cpu = stored({81}, std::nullopt, tokens(300, 4));
  cpu.medium = "CPU";
  caches.apply(0, batch({cpu}), 4);
  removed.block_hashes = {81};
  removed.medium = "CPU";
  auto offloaded = caches.apply(0, batch({removed}), 5);
  EXPECT_EQ(offloaded.removed_blocks, 1u);
  EXPECT_EQ(offloaded.gpu_evicted_blocks, 0u);
}

TEST_F(WorkerCachesTest, BlocksThatCannotBeReproducedAreTrackedButNotIndexed) {
  // Unknown parent: kvgate cannot know what came before.
  auto stats = caches.apply(0, batch({stored({31}, 777, tokens(100, 4))}), 0);
  EXPECT_EQ(stats.unindexable_blocks, 1u);
  EXPECT_EQ(index.entries(), 0u);
  // Its children are not indexable either, and removing them works.
  stats = caches.apply(0, batch({stored({32}, 31, tokens(104, 4))}), 0);
  EXPECT_EQ(stats.unindexable_blocks, 1u);
  BlockRemoved removed;
  removed.block_hashes = {31, 32};
  EXPECT_EQ(caches.apply(0, batch({removed}), 1).removed_blocks, 2u);
  EXPECT_EQ(caches.engine_blocks(0), 0u);
  // Another block size, or multimodal extra keys.
  auto other_size = stored({41}, std::nullopt, tokens(100, 8));
  other_size.block_size = 8;
  auto multimodal = stored({42}, std::nullopt, tokens(100, 4));
  multimodal.unreproducible_extra_keys = true;
  EXPECT_EQ(caches.apply(0, batch({other_size, multimodal}), 2).unindexable_blocks, 2u);
  EXPECT_EQ(index.entries(), 0u);
}

TEST_F(WorkerCachesTest, ASaltedRootOnlyMatchesRequestsWithThatSalt) {
  auto event = stored({51}, std::nullopt, tokens(100, 4));
  event.cache_salt = "tenant-a";
  caches.apply(0, batch({event}), 0);
  auto prompt = tokens(100, 8);
  EXPECT_EQ(held_blocks(0, prompt), 0u);
  EXPECT_EQ(held_blocks(0, prompt, "tenant-b"), 0u);
  EXPECT_EQ(held_blocks(0, prompt, "tenant-a"), 1u);
}

TEST_F(WorkerCachesTest, OffloadedCopiesAreSeparateFromGpuOnes) {
  auto gpu = stored({61}, std::nullopt, tokens(100, 4));
  auto cpu = gpu;
  cpu.medium = "CPU";
  caches.apply(0, batch({gpu, cpu}), 0);
  auto match = index.longest_prefix(request_blocks(tokens(100, 4)));
  EXPECT_EQ(match.gpu_blocks[0], 1u);
  BlockRemoved removed;
  removed.block_hashes = {61};  // medium GPU
  caches.apply(0, batch({removed}), 1);
  match = index.longest_prefix(request_blocks(tokens(100, 4)));
  EXPECT_EQ(match.blocks[0], 1u);  // still offloaded
  EXPECT_EQ(match.gpu_blocks[0], 0u);
}

TEST_F(WorkerCachesTest, GpuBlocksAreAgedFromTheirLastUseAsTheEngineEvictsThem) {
  using policy::age_bucket;
  // Stored at 0 (three blocks of one prompt), a second prompt routed at
  // 5 s, the first prompt's head routed again at 9 s.
  auto first = tokens(100, 12);
  caches.apply(0, batch({stored({11, 12, 13}, std::nullopt, first)}), 0);
  auto second = request_blocks(tokens(500, 8));
  caches.assume(0, second, 5'000, 60'000, 1'000);
  auto head = request_blocks(tokens(100, 4));
  caches.assume(0, head, 9'000, 60'000, 1'000);
  EXPECT_EQ(caches.gpu_blocks(0), 5u);
  auto ages = caches.gpu_block_ages(0, 10'000);
  EXPECT_EQ(ages[age_bucket(10'000)], 2u);  // the first prompt's tail, idle 10 s
  EXPECT_EQ(ages[age_bucket(5'000)], 2u);
  EXPECT_EQ(ages[age_bucket(1'000)], 1u);
  EXPECT_EQ(caches.gpu_block_ages(1, 10'000), policy::AgeHistogram{});
  // Removed by the engine: no longer aged. Offloaded copies never are.
  BlockRemoved removed;
  removed.block_hashes = {13};
  caches.apply(0, batch({removed}), 10'000);
  auto cpu = stored({71}, std::nullopt, tokens(900, 4));
  cpu.medium = "CPU";
  caches.apply(0, batch({cpu}), 10'000);
  ages = caches.gpu_block_ages(0, 10'000);
  EXPECT_EQ(ages[age_bucket(10'000)], 1u);
  EXPECT_EQ(caches.gpu_blocks(0), 4u);
  // A withdrawn request's assumptions go with their ages; a reset takes all.
  caches.withdraw(0, second, 0);
  EXPECT_EQ(caches.gpu_blocks(0), 2u);
  ages = caches.gpu_block_ages(0, 10'000);
  EXPECT_EQ(ages[age_bucket(5'000)], 0u);
  caches.apply(0, batch({AllBlocksCleared{}}), 11'000);
  EXPECT_EQ(caches.gpu_blocks(0), 0u);
  EXPECT_EQ(caches.gpu_block_ages(0, 11'000), policy::AgeHistogram{});
}

// Another gateway's request reused a stored chain: no event says so, but
// the block its prefill stored next names its parent, so the whole chain
// is as fresh as the new block (vLLM frees a request's blocks together).
TEST_F(WorkerCachesTest, AStoreContinuingAChainRefreshesItsAncestors) {
  using policy::age_bucket;
  // Two conversations stored at 0: a four-block one and one block apart.
  caches.apply(0, batch({stored({11, 12, 13, 14}, std::nullopt, tokens(100, 16))}), 0);
  caches.apply(0, batch({stored({21}, std::nullopt, tokens(500, 4))}), 0);
  // At 8 s a request continued the first conversation from its third block
  // (a fork: block 14 is not on its path) and stored two blocks.
  caches.apply(0, batch({stored({15, 16}, 13, tokens(900, 8))}), 8'000);
  auto ages = caches.gpu_block_ages(0, 10'000);
  EXPECT_EQ(ages[age_bucket(2'000)], 5u);   // 11, 12, 13 and the new 15, 16
  EXPECT_EQ(ages[age_bucket(10'000)], 2u);  // 14 and the other conversation
  // A later store from the same chain in the same tick, and one whose
  // parent the gateway never saw: nothing else changes.
  caches.apply(0, batch({stored({17}, 16, tokens(950, 4))}), 8'050);
  caches.apply(0, batch({stored({31}, 999, tokens(700, 4))}), 8'050);
  ages = caches.gpu_block_ages(0, 10'000);
  EXPECT_EQ(ages[age_bucket(2'000)], 6u);
  EXPECT_EQ(ages[age_bucket(10'000)], 2u);
  // The chain is walked at most once a second: a decode block 0.55 s later
  // leaves it as it was, one a second after the walk refreshes it.
  caches.apply(0, batch({stored({18}, 17, tokens(960, 4))}), 8'600);
  ages = caches.gpu_block_ages(0, 8'600);
  EXPECT_EQ(ages[age_bucket(0)], 1u);
  EXPECT_EQ(ages[age_bucket(600)], 6u);
  caches.apply(0, batch({stored({19}, 18, tokens(970, 4))}), 9'000);
  ages = caches.gpu_block_ages(0, 9'000);
  EXPECT_EQ(ages[age_bucket(0)], 8u);  // 11, 12, 13, 15 to 19
  // A publisher that re-stores a block under its own child (a cycle of
  // parents): the walk ends.
  caches.apply(0,
               batch({stored({51}, std::nullopt, tokens(1'000, 4)), stored({52}, 51, tokens(1'100, 4)),
                      stored({51}, 52, tokens(1'000, 4))}),
               20'000);
  caches.apply(0, batch({stored({53}, 52, tokens(1'200, 4))}), 30'000);
  EXPECT_EQ(caches.gpu_block_ages(0, 30'000)[age_bucket(0)], 3u);  // 53, 52 and what 51 means now
}

TEST_F(WorkerCachesTest, AllBlocksClearedForgetsEventsAndAssumptions) {
  caches.apply(0, batch({stored({71}, std::nullopt, tokens(100, 4))}), 0);
  caches.assume(0, request_blocks(tokens(200, 8)), 0, 10'000, 100);
  caches.apply(1, batch({stored({72}, std::nullopt, tokens(100, 4))}), 0);
  auto cleared = caches.apply(0, batch({AllBlocksCleared{}}), 1);
  EXPECT_EQ(cleared.cleared, 1u);
  EXPECT_EQ(cleared.gpu_evicted_blocks, 1u);  // the one block the engine had reported
  EXPECT_EQ(index.entries_of(0), 0u);
  EXPECT_EQ(caches.assumed_blocks(0), 0u);
  EXPECT_EQ(index.entries_of(1), 1u);
}

// A request the engine refused is withdrawn: only the assumptions it
// created go; a shared head another request created, and blocks the events
// confirmed, stay.
TEST_F(WorkerCachesTest, AWithdrawnRequestTakesOnlyWhatItAdded) {
  auto shared = tokens(100, 8);  // two blocks, routed first by request 1
  auto longer = shared;
  auto extra = tokens(500, 8);
  longer.insert(longer.end(), extra.begin(), extra.end());  // four blocks, request 2
  caches.assume(0, request_blocks(shared), 1'000, 60'000, 100, /*ticket=*/1);
  caches.assume(0, request_blocks(longer), 1'100, 60'000, 100, /*ticket=*/2);
  ASSERT_EQ(held_blocks(0, longer), 4u);
  EXPECT_EQ(caches.withdraw(0, request_blocks(longer), 2), 2u);
  EXPECT_EQ(held_blocks(0, longer), 2u);  // request 1's head stays
  EXPECT_EQ(caches.assumed_blocks(0), 2u);
  EXPECT_EQ(caches.withdraw(0, request_blocks(longer), 2), 0u);  // twice is once
  // Confirmed blocks are the events' to remove.
  caches.apply(0, batch({stored({11, 12}, std::nullopt, tokens(100, 8))}), 1'200);
  EXPECT_EQ(caches.withdraw(0, request_blocks(shared), 1), 0u);
  EXPECT_EQ(held_blocks(0, shared), 2u);
}

TEST_F(WorkerCachesTest, AssumptionsExpireAndStayWithinTheWorkersCapacity) {
  auto first = request_blocks(tokens(100, 12));
  auto result = caches.assume(0, first, 1'000, 500, 4);
  EXPECT_EQ(result.new_blocks, 3u);
  EXPECT_EQ(caches.assume(0, first, 1'100, 500, 4).new_blocks, 0u);
  // Capacity 4 blocks: two more push out the least recently assumed, and
  // that eviction is reported (kvgate_index_evictions_total).
  EXPECT_EQ(caches.assume(0, request_blocks(tokens(300, 8)), 1'200, 500, 4).evicted_entries, 1u);
  EXPECT_EQ(caches.assumed_blocks(0), 4u);
  EXPECT_EQ(index.longest_prefix(first).blocks[0], 0u);  // its first block went first
  caches.expire(1'650);                                  // the refresh at 1'100 keeps the rest of `first` until 1'600
  EXPECT_EQ(caches.assumed_blocks(0), 2u);
  caches.expire(1'700);
  EXPECT_EQ(caches.assumed_blocks(0), 0u);
  EXPECT_EQ(index.entries_of(0), 0u);
}

TEST_F(WorkerCachesTest, EventsConfirmAndThenRetractASpeculativeInsert) {
  auto prompt = tokens(100, 4);
  caches.assume(0, request_blocks(prompt), 0, 60'000, 100);
  caches.apply(0, batch({stored({81}, std::nullopt, prompt)}), 10);
  EXPECT_EQ(caches.assumed_blocks(0), 0u);  // the event took over
  BlockRemoved removed;
  removed.block_hashes = {81};
  caches.apply(0, batch({removed}), 20);
  EXPECT_EQ(held_blocks(0, prompt), 0u);  // gone at once, not after the TTL
}

TEST_F(WorkerCachesTest, ForgettingConfirmedBlocksKeepsAssumptions) {
  caches.apply(0, batch({stored({91}, std::nullopt, tokens(100, 4))}), 0);
  caches.assume(0, request_blocks(tokens(500, 4)), 0, 60'000, 100);
  caches.forget_confirmed(0);
  EXPECT_EQ(held_blocks(0, tokens(100, 4)), 0u);
  EXPECT_EQ(held_blocks(0, tokens(500, 4)), 1u);
  EXPECT_EQ(caches.engine_blocks(0), 0u);
}

TEST_F(WorkerCachesTest, APublisherClaimingMoreBlocksThanAnyEngineIsReset) {
  WorkerCaches small{index, "model", CacheLimits{kBlockSize, 2}, attention};
  auto stats = small.apply(0, batch({stored({1, 2, 3}, std::nullopt, tokens(100, 12))}), 0);
  EXPECT_TRUE(stats.over_limit);
  EXPECT_EQ(index.entries_of(0), 0u);
}

BlockStored grouped(BlockStored event, std::uint32_t group, std::optional<std::string> kind,
                    std::optional<std::uint32_t> window = std::nullopt) {
  event.group_idx = group;
  event.spec_kind = std::move(kind);
  event.sliding_window = window;
  return event;
}

BlockRemoved removed_in(std::vector<EngineHash> hashes, std::uint32_t group) {
  BlockRemoved event;
  event.block_hashes = std::move(hashes);
  event.group_idx = group;
  return event;
}

// The local group's blocks are indexed under their own keys, a removal in
// one group leaves the other's copy, and a local block whose parent that
// group skipped chains from the full group's copy.
TEST_F(WorkerCachesTest, EachCacheGroupKeepsItsOwnCopyOfABlock) {
  auto prompt = tokens(100, 12);
  const auto blocks = request_blocks(prompt);
  auto stats = caches.apply(0,
                            batch({grouped(stored({1, 2}, std::nullopt, tokens(100, 8)), 0, "full_attention"),
                                   grouped(stored({2}, 1, tokens(104, 4)), 1, "sliding_window", 8)}),
                            0);
  EXPECT_EQ(stats.stored_blocks, 3u);
  EXPECT_EQ(attention.effective(), (prefix::LocalAttention{prefix::AttentionKind::sliding_window, 8}));
  EXPECT_EQ(held_blocks(0, prompt), 2u);
  EXPECT_FALSE(index.holds(0, prefix::local_group_key(blocks[0])));
  EXPECT_TRUE(index.holds(0, prefix::local_group_key(blocks[1])));
  caches.apply(0, batch({removed_in({2}, 1)}), 1);
  EXPECT_FALSE(index.holds(0, prefix::local_group_key(blocks[1])));
  EXPECT_EQ(held_blocks(0, prompt), 2u);  // the full group's copy stays
  caches.apply(0, batch({removed_in({2}, 0)}), 2);
  EXPECT_EQ(held_blocks(0, prompt), 1u);
}

TEST_F(WorkerCachesTest, AGroupOfAKindNotModelledIsCountedAndNeverApplied) {
  auto prompt = tokens(100, 8);
  auto stats = caches.apply(0,
                            batch({grouped(stored({1, 2}, std::nullopt, tokens(100, 8)), 0, "full_attention"),
                                   grouped(stored({1, 2}, std::nullopt, tokens(100, 8)), 1, "mamba")}),
                            0);
  EXPECT_EQ(stats.unknown_group_blocks, 2u);
  EXPECT_EQ(stats.unknown_group, 1u);
  EXPECT_EQ(stats.unknown_group_kind, "mamba");
  EXPECT_EQ(index.entries_of(0), 2u);
  EXPECT_EQ(attention.reported(), prefix::LocalAttention{});  // full attention, as far as kvgate models it
  // Its removals are not applied to the full group either.
  stats = caches.apply(0, batch({removed_in({1}, 1)}), 1);
  EXPECT_EQ(stats.unknown_group_blocks, 1u);
  EXPECT_EQ(held_blocks(0, prompt), 2u);
}

// vLLM names a chunked-local group's kind; the chunk size comes from the
// event's window field when it carries one, else from the configuration,
// and without either the group cannot be modelled.
TEST_F(WorkerCachesTest, AChunkedLocalGroupTakesItsChunkFromTheConfiguration) {
  auto chunked = grouped(stored({1, 2}, std::nullopt, tokens(100, 8)), 1, "chunked_local_attention");
  EXPECT_EQ(caches.apply(0, batch({chunked}), 0).unknown_group_blocks, 2u);
  attention.configure({prefix::AttentionKind::chunked_local, 8192});
  chunked.group_idx = 2;  // a group not yet judged
  EXPECT_EQ(caches.apply(0, batch({chunked}), 1).unknown_group_blocks, 0u);
  EXPECT_EQ(attention.effective(), (prefix::LocalAttention{prefix::AttentionKind::chunked_local, 8192}));
  EXPECT_TRUE(index.holds(0, prefix::local_group_key(request_blocks(tokens(100, 8))[1])));
}

// Events that name a group but not its kind: group 0 is full attention,
// another group the configured local attention, else not modelled.
TEST_F(WorkerCachesTest, GroupsWithoutAKindFollowTheConfiguration) {
  auto prompt = tokens(100, 8);
  auto local = grouped(stored({1, 2}, std::nullopt, tokens(100, 8)), 1, std::nullopt);
  EXPECT_EQ(caches.apply(0, batch({local}), 0).unknown_group_blocks, 2u);
  attention.configure({prefix::AttentionKind::sliding_window, 8});
  EXPECT_EQ(caches.apply(0, batch({local}), 1).unknown_group_blocks, 0u);
  EXPECT_TRUE(index.holds(0, prefix::local_group_key(request_blocks(prompt)[1])));
  EXPECT_EQ(held_blocks(0, prompt), 0u);  // nothing of the full group yet
  EXPECT_FALSE(attention.reported().has_value());
}

// Approximate mode on a hybrid model: the local group is assumed for the
// blocks the prompt computes, and a request's withdrawal takes both copies.
TEST_F(WorkerCachesTest, RoutingTimeInsertsCoverTheLocalGroup) {
  attention.configure({prefix::AttentionKind::sliding_window, 8});
  auto prompt = tokens(100, 16);
  const auto blocks = request_blocks(prompt);
  caches.assume(0, blocks, 0, 60'000, 1'000, 7);
  EXPECT_EQ(caches.assumed_blocks(0), 8u);
  auto match = index.longest_prefix(blocks);
  index.limit_to_local_attention(blocks, attention.effective(), kBlockSize, 3, match);
  EXPECT_EQ(match.held(0), 3u);
  EXPECT_EQ(caches.withdraw(0, blocks, 7), 8u);
  EXPECT_EQ(index.entries_of(0), 0u);
}

// SGLang's events (and vLLM's before lora_name) give an adapter's number
// only: its blocks cannot be put in the partition a request would hash
// them in, and are never the base model's.
TEST_F(WorkerCachesTest, AnAdapterNamedOnlyByNumberIsNotIndexed) {
  auto event = stored({1, 2}, std::nullopt, tokens(100, 8));
  event.lora_id = 3;
  auto stats = caches.apply(0, batch({event}), 0);
  EXPECT_EQ(stats.unindexable_blocks, 2u);
  EXPECT_EQ(held_blocks(0, tokens(100, 8)), 0u);
  event.lora_name = "support-bot";
  caches.apply(0, batch({event}), 1);
  EXPECT_EQ(held_blocks(0, tokens(100, 8)), 0u);  // the adapter's partition, not the base model's
}

// The pool holds every group's blocks: a local block stands for one block
// per local group when the worker's capacity is counted (Gemma 3's five
// sliding groups beside the full one take six blocks per position).
TEST_F(WorkerCachesTest, LocalBlocksCountOncePerLocalGroupAgainstTheCapacity) {
  attention.configure({prefix::AttentionKind::sliding_window, 8, 3});
  const auto blocks = request_blocks(tokens(100, 16));
  // 4 full blocks + 4 local ones x 3 groups = 16 pool blocks.
  auto result = caches.assume(0, blocks, 0, 60'000, 16, 7);
  EXPECT_EQ(result.evicted_entries, 0u);
  EXPECT_EQ(caches.assumed_blocks(0), 8u);
  // A capacity of 12 drops the oldest assumptions (the full blocks, then
  // the local ones) until what stays fits.
  const auto other = request_blocks(tokens(500, 4));
  result = caches.assume(0, other, 1, 60'000, 12, 8);
  EXPECT_GT(result.evicted_entries, 0u);
  EXPECT_TRUE(index.holds(0, prefix::local_group_key(other[0])));
  EXPECT_FALSE(index.holds(0, blocks[0]));
}

}  // namespace
}  // namespace kvgate::kv_events
