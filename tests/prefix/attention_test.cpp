#include "kvgate/prefix/attention.hpp"

#include <gtest/gtest.h>

#include <set>

namespace kvgate::prefix {
namespace {

std::uint32_t hit(const LocalAttention& attention, std::uint32_t block_size, std::uint32_t full_blocks,
                  const std::set<std::uint32_t>& held) {
  return hybrid_hit_blocks(attention, block_size, full_blocks,
                           [&](std::uint32_t block) { return held.contains(block); });
}

constexpr LocalAttention kWindow4{AttentionKind::sliding_window, 4};

TEST(HybridHit, FullAttentionAloneKeepsTheFullRun) {
  EXPECT_EQ(hit({}, 2, 6, {}), 6u);
  EXPECT_FALSE(LocalAttention{}.hybrid());
  EXPECT_EQ(to_string(LocalAttention{}), "full");
  EXPECT_EQ(to_string(kWindow4), "sliding_window 4");
}

// vLLM's own example (SlidingWindowManager.find_longest_cache_hit): window
// 4 with blocks of 2 needs ceil(3 / 2) = 2 held blocks before the hit
// point; [NULL, NULL, 8, 3, NULL, 9] is a hit of 4 blocks.
TEST(HybridHit, ASlidingWindowNeedsItsWindowBeforeTheHitPoint) {
  EXPECT_EQ(hit(kWindow4, 2, 6, {2, 3, 5}), 4u);
  EXPECT_EQ(hit(kWindow4, 2, 6, {0, 1, 2, 3, 4, 5}), 6u);
  // Only the last window matters: the blocks before it may be gone.
  EXPECT_EQ(hit(kWindow4, 2, 6, {4, 5}), 6u);
  // The full run bounds the scan: held local blocks beyond it do not count.
  EXPECT_EQ(hit(kWindow4, 2, 3, {3, 4, 5}), 0u);
}

TEST(HybridHit, WithoutAWholeWindowTheRunFromTheFirstBlockCounts) {
  // Before the first window is complete nothing earlier is read.
  EXPECT_EQ(hit(kWindow4, 2, 6, {0, 3, 5}), 1u);
  EXPECT_EQ(hit(kWindow4, 2, 6, {1, 3, 5}), 0u);
  EXPECT_EQ(hit(kWindow4, 2, 6, {}), 0u);
  // A window of 1,024 tokens in blocks of 16 needs 64 blocks.
  std::set<std::uint32_t> last_63;
  for (std::uint32_t block = 37; block < 100; ++block) {
    last_63.insert(block);
  }
  EXPECT_EQ(hit({AttentionKind::sliding_window, 1024}, 16, 100, last_63), 0u);
  last_63.insert(36);
  EXPECT_EQ(hit({AttentionKind::sliding_window, 1024}, 16, 100, last_63), 100u);
}

// ChunkedLocalAttentionManager: the blocks before the last chunk boundary
// at or below the hit point are not needed; from there the held run counts.
TEST(HybridHit, ChunkedLocalAttentionNeedsTheLastChunkOnly) {
  const LocalAttention chunks{AttentionKind::chunked_local, 8};
  // 7 blocks of 2 = 14 tokens: the last chunk starts at token 8, block 4.
  EXPECT_EQ(hit(chunks, 2, 7, {4, 5}), 6u);
  EXPECT_EQ(hit(chunks, 2, 7, {4, 5, 6}), 7u);
  EXPECT_EQ(hit(chunks, 2, 7, {}), 4u);
  // A run ending on a chunk boundary needs nothing of the local group.
  EXPECT_EQ(hit(chunks, 2, 8, {}), 8u);
}

TEST(HybridHit, LocalKeysNeverMeetFullKeys) {
  for (BlockHash block : {BlockHash{0}, BlockHash{1}, BlockHash{0x123456789abcdefULL}, ~BlockHash{0}}) {
    EXPECT_NE(local_group_key(block), block);
    EXPECT_NE(local_group_key(block), local_group_key(block + 1));
  }
}

}  // namespace
}  // namespace kvgate::prefix
