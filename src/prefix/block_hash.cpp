#include "kvgate/prefix/block_hash.hpp"

#include <xxhash.h>

#include <bit>
#include <cstring>

namespace kvgate::prefix {
namespace {

// Token ids are hashed as little-endian uint32 values whatever the host's
// byte order, so hashes are the same on every machine.
constexpr bool kLittleEndianHost = std::endian::native == std::endian::little;

BlockHash hash_tokens(BlockHash seed, std::span<const TokenId> tokens) {
  if constexpr (kLittleEndianHost) {
    return XXH3_64bits_withSeed(tokens.data(), tokens.size_bytes(), seed);
  } else {
    std::vector<unsigned char> bytes;
    bytes.reserve(tokens.size_bytes());
    for (auto token : tokens) {
      for (int shift = 0; shift < 32; shift += 8) {
        bytes.push_back(static_cast<unsigned char>(token >> shift));
      }
    }
    return XXH3_64bits_withSeed(bytes.data(), bytes.size(), seed);
  }
}

BlockHash hash_text(BlockHash seed, std::string_view text) {
  return XXH3_64bits_withSeed(text.data(), text.size(), seed);
}

}  // namespace

BlockHash partition_seed(const Partition& partition) {
  // Each field is hashed with its own domain tag chained in, so ("ab", "")
  // and ("a", "b") differ.
  BlockHash seed = hash_text(0x6b76676174652d31ULL, "kvgate-block-hash-v1");
  seed = hash_text(seed ^ 0x01, partition.model);
  seed = hash_text(seed ^ 0x02, partition.lora);
  seed = hash_text(seed ^ 0x03, partition.cache_salt);
  return seed;
}

BlockHash hash_block(BlockHash parent, std::span<const TokenId> block_tokens) {
  return hash_tokens(parent, block_tokens);
}

std::vector<BlockHash> hash_blocks(std::span<const TokenId> tokens, std::uint32_t block_size, BlockHash seed) {
  std::vector<BlockHash> hashes;
  const auto full_blocks = tokens.size() / block_size;
  hashes.reserve(full_blocks);
  BlockHash parent = seed;
  for (std::size_t block = 0; block < full_blocks; ++block) {
    parent = hash_block(parent, tokens.subspan(block * block_size, block_size));
    hashes.push_back(parent);
  }
  return hashes;
}

}  // namespace kvgate::prefix
