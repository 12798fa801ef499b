#include "kvgate/prefix/block_hash.hpp"

#include <gtest/gtest.h>

#include <numeric>

namespace kvgate::prefix {
namespace {

std::vector<TokenId> iota_tokens(std::size_t count) {
  std::vector<TokenId> tokens(count);
  std::iota(tokens.begin(), tokens.end(), 1000);
  return tokens;
}

TEST(BlockHash, OnlyFullBlocksAreHashed) {
  auto tokens = iota_tokens(47);
  EXPECT_EQ(hash_blocks(tokens, 16, 7).size(), 2u);
  EXPECT_EQ(hash_blocks(std::span(tokens).first(15), 16, 7).size(), 0u);
}

TEST(BlockHash, EachHashCoversItsWholePrefix) {
  auto tokens = iota_tokens(48);
  auto base = hash_blocks(tokens, 16, 7);
  auto changed = tokens;
  changed[3] += 1;  // inside block 0
  auto other = hash_blocks(changed, 16, 7);
  for (std::size_t block = 0; block < 3; ++block) {
    EXPECT_NE(base[block], other[block]) << block;
  }
  changed = tokens;
  changed[40] += 1;  // inside block 2 only
  other = hash_blocks(changed, 16, 7);
  EXPECT_EQ(base[0], other[0]);
  EXPECT_EQ(base[1], other[1]);
  EXPECT_NE(base[2], other[2]);
}

TEST(BlockHash, PartitionsNeverShareBlocks) {
  auto tokens = iota_tokens(32);
  auto plain = partition_seed({"qwen3", "", ""});
  EXPECT_NE(plain, partition_seed({"qwen3", "", "tenant-a"}));
  EXPECT_NE(partition_seed({"qwen3", "", "tenant-a"}), partition_seed({"qwen3", "", "tenant-b"}));
  EXPECT_NE(plain, partition_seed({"qwen3", "adapter", ""}));
  EXPECT_NE(partition_seed({"ab", "", ""}), partition_seed({"a", "b", ""}));
  EXPECT_NE(hash_blocks(tokens, 16, plain)[0], hash_blocks(tokens, 16, partition_seed({"qwen3", "", "s"}))[0]);
}

// Golden values: these pin the function. If this test fails, the hash
// changed, and every deployed index and decision log comparison with it.
TEST(BlockHash, GoldenValues) {
  auto seed = partition_seed({"qwen3", "", ""});
  EXPECT_EQ(seed, 0x7973336d4cdf0d6eu) << std::hex << "seed 0x" << seed;
  auto hashes = hash_blocks(iota_tokens(32), 16, seed);
  ASSERT_EQ(hashes.size(), 2u);
  EXPECT_EQ(hashes[0], 0xd7806b580efafed3u) << std::hex << "block 0 0x" << hashes[0];
  EXPECT_EQ(hashes[1], 0x1d535af2e03b43deu) << std::hex << "block 1 0x" << hashes[1];
}

}  // namespace
}  // namespace kvgate::prefix
