#include "kvgate/index/prefix_index.hpp"

#include <gtest/gtest.h>

namespace kvgate::index {
namespace {

constexpr BlockHash kA = 1, kB = 2, kC = 3, kD = 4, kE = 5, kX = 99;

std::vector<BlockHash> hashes(std::initializer_list<BlockHash> values) {
  return values;
}

TEST(PrefixIndex, EachWorkerGetsItsOwnLeadingRun) {
  PrefixIndex index(1000);
  index.insert(0, hashes({kA, kB, kC}), Tier::gpu, 1);
  index.insert(1, hashes({kA, kB}), Tier::gpu, 2);
  index.insert(2, hashes({kA, kX, kC}), Tier::gpu, 3);
  auto match = index.longest_prefix(hashes({kA, kB, kC, kD}));
  EXPECT_EQ(match.blocks[0], 3u);
  EXPECT_EQ(match.blocks[1], 2u);
  EXPECT_EQ(match.blocks[2], 1u);  // holds C too, but not B: a run must be unbroken
  EXPECT_EQ(match.blocks[3], 0u);
}

TEST(PrefixIndex, TiersAreReportedSeparately) {
  PrefixIndex index(1000);
  index.insert(0, hashes({kA, kB}), Tier::gpu, 1);
  index.insert(0, hashes({kC}), Tier::offloaded, 1);
  auto match = index.longest_prefix(hashes({kA, kB, kC}));
  EXPECT_EQ(match.blocks[0], 3u);
  EXPECT_EQ(match.gpu_blocks[0], 2u);
  // Both tiers of one block count as one entry.
  index.insert(0, hashes({kC}), Tier::gpu, 2);
  EXPECT_EQ(index.entries(), 3u);
}

TEST(PrefixIndex, RemovingABlockCutsTheRunThere) {
  PrefixIndex index(1000);
  index.insert(0, hashes({kA, kB, kC}), Tier::gpu, 1);
  index.insert(1, hashes({kA, kB, kC}), Tier::gpu, 1);
  index.remove(0, hashes({kB}), Tier::gpu);
  auto match = index.longest_prefix(hashes({kA, kB, kC}));
  EXPECT_EQ(match.blocks[0], 1u);
  EXPECT_EQ(match.blocks[1], 3u);
  EXPECT_EQ(index.entries(), 5u);
  index.remove(1, hashes({kB}), Tier::gpu);
  EXPECT_EQ(index.blocks(), 2u);             // nobody holds B any more
  index.remove(3, hashes({kX}), Tier::gpu);  // unknown blocks are ignored
}

TEST(PrefixIndex, DroppingAWorkerForgetsOnlyItsEntries) {
  PrefixIndex index(1000);
  index.insert(0, hashes({kA, kB}), Tier::gpu, 1);
  index.insert(1, hashes({kA}), Tier::gpu, 1);
  index.drop_worker(0);
  EXPECT_EQ(index.entries(), 1u);
  EXPECT_EQ(index.entries_of(0), 0u);
  EXPECT_EQ(index.entries_of(1), 1u);
  EXPECT_EQ(index.blocks(), 1u);
  EXPECT_FALSE(index.holds(0, kA));
  EXPECT_TRUE(index.holds(1, kA));
}

TEST(PrefixIndex, TheCapEvictsTheLeastRecentlyInsertedBlocks) {
  PrefixIndex index(4);
  EXPECT_EQ(index.insert(0, hashes({kA, kB, kC}), Tier::gpu, 1), 0u);
  index.insert(1, hashes({kA}), Tier::gpu, 2);  // refreshes A: B is now the oldest
  EXPECT_EQ(index.insert(1, hashes({kD, kE}), Tier::gpu, 3), 2u);
  EXPECT_EQ(index.entries(), 4u);
  EXPECT_FALSE(index.holds(0, kB));
  EXPECT_FALSE(index.holds(0, kC));
  EXPECT_TRUE(index.holds(0, kA));
  EXPECT_EQ(index.longest_prefix(hashes({kA, kB})).blocks[0], 1u);
}

TEST(PrefixIndex, SlotsOfRemovedBlocksAreReused) {
  PrefixIndex index(1000);
  for (BlockHash round = 0; round < 100; ++round) {
    index.insert(0, hashes({round * 10 + 1, round * 10 + 2}), Tier::gpu, round);
    index.remove(0, hashes({round * 10 + 1, round * 10 + 2}), Tier::gpu);
  }
  EXPECT_EQ(index.blocks(), 0u);
  EXPECT_EQ(index.entries(), 0u);
  index.insert(5, hashes({kA}), Tier::gpu, 1000);
  EXPECT_EQ(index.longest_prefix(hashes({kA})).blocks[5], 1u);
}

}  // namespace
}  // namespace kvgate::index
