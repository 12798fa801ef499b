#include "block_pool.hpp"

#include <gtest/gtest.h>

#include <numeric>

namespace kvgate::sim {
namespace {

constexpr std::uint32_t kBlockSize = 4;

std::vector<TokenId> tokens_for(std::size_t blocks, TokenId first = 1) {
  std::vector<TokenId> tokens(blocks * kBlockSize);
  std::iota(tokens.begin(), tokens.end(), first);
  return tokens;
}

// Allocates and caches a prompt's full blocks as a request would.
std::vector<BlockId> store_prompt(BlockPool& pool, const std::vector<TokenId>& tokens) {
  auto hashes = prefix::hash_blocks(tokens, kBlockSize, 1);
  auto blocks = pool.allocate(static_cast<std::uint32_t>(hashes.size()));
  EXPECT_TRUE(blocks);
  pool.cache_blocks(*blocks, hashes, std::nullopt, tokens);
  return *blocks;
}

void release_like_vllm(BlockPool& pool, std::vector<BlockId> blocks) {
  std::reverse(blocks.begin(), blocks.end());  // tail blocks are evicted first
  pool.release(blocks);
}

TEST(BlockPool, FreshPoolHandsOutBlocksInOrder) {
  BlockPool pool(8, kBlockSize);
  auto blocks = pool.allocate(3);
  ASSERT_TRUE(blocks);
  EXPECT_EQ(*blocks, (std::vector<BlockId>{0, 1, 2}));
  EXPECT_EQ(pool.free_blocks(), 5u);
  EXPECT_DOUBLE_EQ(pool.usage(), 3.0 / 8.0);
}

TEST(BlockPool, AllocationBeyondFreeBlocksChangesNothing) {
  BlockPool pool(2, kBlockSize);
  EXPECT_FALSE(pool.allocate(3));
  EXPECT_EQ(pool.free_blocks(), 2u);
}

TEST(BlockPool, StoredBlocksAreMatchedLongestPrefixFirst) {
  BlockPool pool(8, kBlockSize);
  auto tokens = tokens_for(3);
  auto blocks = store_prompt(pool, tokens);
  auto events = pool.take_events();
  ASSERT_EQ(events.size(), 1u);
  const auto& stored = std::get<BlockStored>(events[0]);
  EXPECT_EQ(stored.block_hashes, prefix::hash_blocks(tokens, kBlockSize, 1));
  EXPECT_EQ(stored.token_ids, tokens);
  EXPECT_FALSE(stored.parent_block_hash);

  auto longer = tokens;
  longer.insert(longer.end(), {90, 91, 92, 93});
  EXPECT_EQ(pool.find_cached_prefix(prefix::hash_blocks(longer, kBlockSize, 1)), blocks);
  auto diverging = tokens;
  diverging[5] = 999;  // block 1 differs, so blocks 1.. miss even if block 2 matched
  EXPECT_EQ(pool.find_cached_prefix(prefix::hash_blocks(diverging, kBlockSize, 1)), std::vector<BlockId>{blocks[0]});
}

TEST(BlockPool, FreedBlocksStayMatchableUntilReallocated) {
  BlockPool pool(4, kBlockSize);
  auto tokens = tokens_for(2);
  auto blocks = store_prompt(pool, tokens);
  release_like_vllm(pool, blocks);
  pool.take_events();
  EXPECT_EQ(pool.free_blocks(), 4u);
  auto hashes = prefix::hash_blocks(tokens, kBlockSize, 1);
  EXPECT_EQ(pool.find_cached_prefix(hashes).size(), 2u);
  // A hit takes the blocks out of the free queue again.
  pool.touch(pool.find_cached_prefix(hashes));
  EXPECT_EQ(pool.free_blocks(), 2u);
  EXPECT_TRUE(pool.take_events().empty());
}

TEST(BlockPool, EvictsLeastRecentlyFreedAndTailBlocksFirst) {
  BlockPool pool(4, kBlockSize);
  auto first = store_prompt(pool, tokens_for(2, 1));     // blocks 0,1
  auto second = store_prompt(pool, tokens_for(2, 100));  // blocks 2,3
  release_like_vllm(pool, first);                        // free queue: 1, 0
  release_like_vllm(pool, second);                       // free queue: 1, 0, 3, 2
  pool.take_events();
  auto taken = pool.allocate(1);
  ASSERT_TRUE(taken);
  EXPECT_EQ(*taken, std::vector<BlockId>{first[1]});  // the first prompt's tail block
  auto events = pool.take_events();
  ASSERT_EQ(events.size(), 1u);
  auto first_hashes = prefix::hash_blocks(tokens_for(2, 1), kBlockSize, 1);
  EXPECT_EQ(std::get<BlockRemoved>(events[0]).block_hashes, std::vector<BlockHash>{first_hashes[1]});
  // The first prompt now matches one block; the second still matches both.
  EXPECT_EQ(pool.find_cached_prefix(first_hashes).size(), 1u);
  EXPECT_EQ(pool.find_cached_prefix(prefix::hash_blocks(tokens_for(2, 100), kBlockSize, 1)).size(), 2u);
}

TEST(BlockPool, BlocksInUseAreNeverEvicted) {
  BlockPool pool(3, kBlockSize);
  auto held = store_prompt(pool, tokens_for(2));
  EXPECT_FALSE(pool.allocate(2));
  auto other = pool.allocate(1);
  ASSERT_TRUE(other);
  EXPECT_NE((*other)[0], held[0]);
  EXPECT_NE((*other)[0], held[1]);
}

TEST(BlockPool, AHashHeldTwiceSurvivesOneEviction) {
  BlockPool pool(4, kBlockSize);
  auto tokens = tokens_for(1);
  auto first = store_prompt(pool, tokens);  // two requests computed the same block
  auto second = store_prompt(pool, tokens);
  EXPECT_EQ(pool.take_events().size(), 2u);  // two BlockStored with the same hash
  pool.release(first);
  pool.release(second);
  // Free queue: 2, 3, first[0], second[0]; take three to reach first[0].
  ASSERT_TRUE(pool.allocate(3));
  auto events = pool.take_events();
  ASSERT_EQ(events.size(), 1u);
  EXPECT_TRUE(std::holds_alternative<BlockRemoved>(events[0]));
  EXPECT_TRUE(pool.is_cached(prefix::hash_blocks(tokens, kBlockSize, 1)[0]));
}

TEST(BlockPool, ResetIsRefusedWhileBlocksAreInUse) {
  BlockPool pool(4, kBlockSize);
  auto blocks = store_prompt(pool, tokens_for(2));
  pool.take_events();
  EXPECT_FALSE(pool.reset());
  EXPECT_TRUE(pool.take_events().empty());
  pool.release(blocks);
  EXPECT_TRUE(pool.reset());
  auto events = pool.take_events();
  ASSERT_EQ(events.size(), 1u);
  EXPECT_TRUE(std::holds_alternative<AllBlocksCleared>(events[0]));
  EXPECT_TRUE(pool.find_cached_prefix(prefix::hash_blocks(tokens_for(2), kBlockSize, 1)).empty());
  // Reallocating a cleared block emits no BlockRemoved.
  ASSERT_TRUE(pool.allocate(4));
  EXPECT_TRUE(pool.take_events().empty());
}

TEST(BlockPool, StoredEventCarriesTheParentOfAContinuation) {
  BlockPool pool(4, kBlockSize);
  auto tokens = tokens_for(2);
  auto hashes = prefix::hash_blocks(tokens, kBlockSize, 1);
  auto blocks = pool.allocate(2);
  ASSERT_TRUE(blocks);
  pool.cache_blocks(std::span(*blocks).first(1), std::span(hashes).first(1), std::nullopt,
                    std::span(tokens).first(kBlockSize));
  pool.cache_blocks(std::span(*blocks).subspan(1), std::span(hashes).subspan(1), hashes[0],
                    std::span(tokens).subspan(kBlockSize));
  auto events = pool.take_events();
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(std::get<BlockStored>(events[1]).parent_block_hash, hashes[0]);
}

}  // namespace
}  // namespace kvgate::sim
