#include "kvgate/index/prefix_index.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <map>
#include <random>
#include <set>
#include <thread>

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

// The lookup against a plain model of who holds what on which tier, over
// random states of one and of several mask words: fleets where most blocks
// are on the GPU (the lookup's shortcut skips the offloaded words there),
// where many are offloaded, and where runs break in the middle.
TEST(PrefixIndexWidth, LookupsAgreeWithAPlainModelOfTheHoldings) {
  std::mt19937_64 random(20261202);
  for (const std::uint32_t workers : {5u, 64u, 150u, 1000u}) {
    for (const double offloaded_share : {0.0, 0.1, 0.6}) {
      PrefixIndex index(10'000'000);
      std::map<std::pair<WorkerSlot, BlockHash>, std::set<Tier>> held;
      constexpr std::size_t kPrompt = 64;
      std::vector<BlockHash> prompt(kPrompt);
      for (std::size_t block = 0; block < kPrompt; ++block) {
        prompt[block] = 1000 + block;
      }
      std::uniform_real_distribution<double> unit(0, 1);
      for (std::uint32_t worker = 0; worker < workers; ++worker) {
        const auto run = static_cast<std::size_t>(random() % (kPrompt + 1));
        for (std::size_t block = 0; block < run; ++block) {
          const auto tier = unit(random) < offloaded_share ? Tier::offloaded : Tier::gpu;
          index.insert(static_cast<WorkerSlot>(worker), std::span(prompt).subspan(block, 1), tier, 1);
          held[{static_cast<WorkerSlot>(worker), prompt[block]}].insert(tier);
        }
        // A hole: a block dropped from the middle of some runs.
        if (run > 2 && random() % 4 == 0) {
          const auto hole = random() % run;
          for (const auto tier : {Tier::gpu, Tier::offloaded}) {
            index.remove(static_cast<WorkerSlot>(worker), std::span(prompt).subspan(hole, 1), tier);
          }
          held.erase({static_cast<WorkerSlot>(worker), prompt[hole]});
        }
      }
      const auto match = index.longest_prefix(prompt);
      for (std::uint32_t worker = 0; worker < workers; ++worker) {
        const auto slot = static_cast<WorkerSlot>(worker);
        std::uint32_t any = 0;
        while (any < kPrompt && held.count({slot, prompt[any]}) != 0) {
          ++any;
        }
        std::uint32_t gpu = 0;
        while (gpu < kPrompt && held.count({slot, prompt[gpu]}) != 0 && held[{slot, prompt[gpu]}].count(Tier::gpu)) {
          ++gpu;
        }
        ASSERT_EQ(match.held(slot), any) << workers << " workers, offloaded " << offloaded_share << ", worker "
                                         << worker;
        ASSERT_EQ(match.held_on_gpu(slot), gpu)
            << workers << " workers, offloaded " << offloaded_share << ", worker " << worker;
      }
    }
  }
}

// A hybrid model: every worker's run is cut exactly as the reference rule
// (prefix::hybrid_hit_blocks) cuts it, for random full runs and random
// local-group holdings, sliding windows and chunks, one word and several.
TEST(PrefixIndexHybrid, LocalAttentionCutsEveryRunAsTheReferenceRule) {
  std::mt19937_64 random(20261204);
  constexpr std::uint32_t kPrompt = 96;
  constexpr std::uint32_t kBlockSize = 4;
  std::vector<BlockHash> prompt(kPrompt);
  for (std::uint32_t block = 0; block < kPrompt; ++block) {
    prompt[block] = 0x9e3779b97f4a7c15ULL * (block + 7);
  }
  for (const std::uint32_t workers : {5u, 70u}) {
    for (const prefix::LocalAttention attention : {prefix::LocalAttention{prefix::AttentionKind::sliding_window, 16},
                                                   prefix::LocalAttention{prefix::AttentionKind::sliding_window, 5},
                                                   prefix::LocalAttention{prefix::AttentionKind::chunked_local, 32}}) {
      PrefixIndex index(1'000'000);
      std::vector<std::set<std::uint32_t>> local(workers);
      std::vector<std::uint32_t> runs(workers);
      for (WorkerSlot worker = 0; worker < workers; ++worker) {
        runs[worker] = static_cast<std::uint32_t>(random() % (kPrompt + 1));
        index.insert(worker, std::span(prompt).first(runs[worker]), Tier::gpu, 1);
        std::vector<BlockHash> keys;
        const auto density = random() % 4;  // none, sparse, most, all
        for (std::uint32_t block = 0; block < kPrompt; ++block) {
          if (density == 3 || (density > 0 && random() % 4 < density)) {
            local[worker].insert(block);
            keys.push_back(prefix::local_group_key(prompt[block]));
          }
        }
        index.insert(worker, keys, Tier::gpu, 1);
      }
      const std::uint32_t reusable = kPrompt - 3;
      auto match = index.longest_prefix(prompt);
      index.limit_to_local_attention(prompt, attention, kBlockSize, reusable, match);
      for (WorkerSlot worker = 0; worker < workers; ++worker) {
        const auto expected =
            prefix::hybrid_hit_blocks(attention, kBlockSize, std::min(runs[worker], reusable),
                                      [&](std::uint32_t block) { return local[worker].contains(block); });
        EXPECT_EQ(match.held(worker), expected) << prefix::to_string(attention) << " worker " << worker;
        EXPECT_EQ(match.held_on_gpu(worker), expected);
      }
    }
  }
}

TEST(PrefixIndexWidth, WorkersBeyondTheFirstWordGetTheirOwnRuns) {
  PrefixIndex index(100'000);
  EXPECT_EQ(index.mask_words(), 1u);
  index.insert(3, hashes({kA, kB}), Tier::gpu, 1);
  index.insert(64, hashes({kA, kB, kC}), Tier::gpu, 2);  // the second word
  EXPECT_EQ(index.mask_words(), 2u);
  index.insert(999, hashes({kA}), Tier::offloaded, 3);
  index.insert(static_cast<WorkerSlot>(kMaxWorkers - 1), hashes({kA, kB, kC, kD}), Tier::gpu, 4);
  EXPECT_EQ(index.mask_words(), kMaxWords);
  auto match = index.longest_prefix(hashes({kA, kB, kC, kD}));
  EXPECT_EQ(match.blocks.size(), kMaxWorkers);
  EXPECT_EQ(match.held(3), 2u);
  EXPECT_EQ(match.held(64), 3u);
  EXPECT_EQ(match.held(999), 1u);
  EXPECT_EQ(match.held_on_gpu(999), 0u);
  EXPECT_EQ(match.held(kMaxWorkers - 1), 4u);
  EXPECT_EQ(match.held(65), 0u);  // a neighbour in the same word holds nothing
  EXPECT_EQ(index.entries(), 10u);
  EXPECT_EQ(index.entries_of(999), 1u);
  // Blocks inserted before the widening kept their holders.
  EXPECT_TRUE(index.holds(3, kB));
  index.remove(64, hashes({kB}), Tier::gpu);
  EXPECT_EQ(index.longest_prefix(hashes({kA, kB, kC})).held(64), 1u);
  index.drop_worker(static_cast<WorkerSlot>(kMaxWorkers - 1));
  EXPECT_EQ(index.longest_prefix(hashes({kA, kB, kC, kD})).held(kMaxWorkers - 1), 0u);
  EXPECT_EQ(index.blocks(), 3u);  // D had no other holder
}

TEST(PrefixIndexWidth, AWorkerInAnotherWordDoesNotKeepABlockAliveForTheCap) {
  PrefixIndex index(3);
  index.insert(100, hashes({kA, kB}), Tier::gpu, 1);
  index.insert(1, hashes({kC, kD}), Tier::gpu, 2);  // over the cap: A goes, with its holder in word 1
  EXPECT_EQ(index.entries(), 3u);
  EXPECT_FALSE(index.holds(100, kA));
  EXPECT_TRUE(index.holds(100, kB));
  EXPECT_EQ(index.entries_of(100), 1u);
}

TEST(PrefixIndexWidth, AMatchPassedBackInIsResizedToTheIndex) {
  PrefixIndex narrow(1000);
  PrefixIndex wide(1000);
  narrow.insert(2, hashes({kA}), Tier::gpu, 1);
  wide.insert(200, hashes({kA, kB}), Tier::gpu, 1);
  PrefixMatch match;
  wide.longest_prefix(hashes({kA, kB}), match);
  EXPECT_EQ(match.held(200), 2u);
  narrow.longest_prefix(hashes({kA, kB}), match);
  EXPECT_EQ(match.blocks.size(), kWorkersPerWord);
  EXPECT_EQ(match.held(2), 1u);
  EXPECT_EQ(match.held(200), 0u);  // nothing left over from the wide lookup
}

}  // namespace
}  // namespace kvgate::index

namespace kvgate::index {
namespace {

TEST(PrefixIndexGrowth, RebuildsKeepEveryBlockAndTheEvictionOrder) {
  PrefixIndex index(1'000'000);
  const auto initial_slots = index.capacity_slots();
  std::vector<BlockHash> blocks;
  for (BlockHash block = 1; block <= 5'000; ++block) {
    blocks.push_back(block * 0x9E3779B97F4A7C15ULL);
  }
  index.insert(0, blocks, Tier::gpu, 1);
  EXPECT_GT(index.capacity_slots(), initial_slots);
  EXPECT_EQ(index.longest_prefix(blocks).blocks[0], 5'000u);
  EXPECT_EQ(index.touched(blocks[10]), 1u);
  // The cap still evicts the oldest first after the table moved.
  index.set_max_entries(4'000);
  index.insert(1, std::span(blocks).first(1), Tier::gpu, 2);
  EXPECT_FALSE(index.holds(0, blocks[1]));
  EXPECT_TRUE(index.holds(0, blocks[0]));  // refreshed by worker 1's insert
  EXPECT_TRUE(index.holds(0, blocks.back()));
  EXPECT_EQ(index.entries(), 4'000u);
}

TEST(PrefixIndexGrowth, TombstonesAreReusedAndPurgedSoTheTableStaysBounded) {
  PrefixIndex index(1'000'000);
  for (BlockHash round = 0; round < 20'000; ++round) {
    std::vector<BlockHash> block{round + 1};
    index.insert(0, block, Tier::gpu, 0);
    index.remove(0, block, Tier::gpu);
  }
  EXPECT_EQ(index.blocks(), 0u);
  EXPECT_LE(index.capacity_slots(), 2'048u);
}

TEST(PrefixIndexConcurrency, ReadersSeeWholeRunsWhileTheWriterGrowsTheTable) {
  PrefixIndex index(10'000'000);
  std::vector<BlockHash> prompt;
  for (BlockHash block = 1; block <= 64; ++block) {
    prompt.push_back(block);
  }
  index.insert(0, prompt, Tier::gpu, 0);
  std::atomic<bool> done{false};
  std::atomic<std::uint64_t> wrong{0};
  std::thread reader([&] {
    while (!done.load()) {
      // Worker 0's run never changes; the writer only adds other blocks.
      if (index.longest_prefix(prompt).blocks[0] != 64) {
        wrong.fetch_add(1);
      }
    }
  });
  for (BlockHash block = 1'000; block < 200'000; block += 100) {
    std::vector<BlockHash> batch;
    for (BlockHash offset = 0; offset < 100; ++offset) {
      batch.push_back(block + offset);
    }
    index.insert(1, batch, Tier::gpu, 1);
  }
  done = true;
  reader.join();
  EXPECT_EQ(wrong.load(), 0u);
  EXPECT_EQ(index.longest_prefix(prompt).blocks[0], 64u);
}

TEST(PrefixIndexConcurrency, ReadersSeeWholeRunsWhileTheWriterWidensTheMasks) {
  PrefixIndex index(10'000'000);
  std::vector<BlockHash> prompt;
  for (BlockHash block = 1; block <= 64; ++block) {
    prompt.push_back(block);
  }
  index.insert(7, prompt, Tier::gpu, 0);
  std::atomic<bool> done{false};
  std::atomic<std::uint64_t> wrong{0};
  std::thread reader([&] {
    PrefixMatch match;
    while (!done.load()) {
      index.longest_prefix(prompt, match);
      if (match.held(7) != 64) {
        wrong.fetch_add(1);
      }
    }
  });
  // Each new word rebuilds the table one word wider under the reader.
  for (std::size_t worker = kWorkersPerWord; worker < kMaxWorkers; worker += kWorkersPerWord) {
    index.insert(static_cast<WorkerSlot>(worker), std::span(prompt).first(worker % 63 + 1), Tier::gpu, 1);
  }
  done = true;
  reader.join();
  EXPECT_EQ(wrong.load(), 0u);
  EXPECT_EQ(index.mask_words(), kMaxWords);
  auto match = index.longest_prefix(prompt);
  EXPECT_EQ(match.held(7), 64u);
  EXPECT_EQ(match.held(128), 128 % 63 + 1);
}

}  // namespace
}  // namespace kvgate::index
