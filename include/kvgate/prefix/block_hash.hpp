#pragma once
// Chained block hashes over token ids: the one function the request path,
// the KV-event path and the simulator all use. A contract: golden tests pin
// its values, and changing it invalidates every index built with it.
//
// hash(block i) = XXH3_64(tokens of block i, seed = hash(block i-1)), with
// hash(block -1) = the partition seed. Only full blocks are hashed (engines
// cache only full blocks). The partition seed folds in everything that
// splits an engine's cache (model, LoRA adapter, cache_salt), so prompts in
// different partitions never share a hash, as vLLM's extra keys on block 0
// keep salted prompts apart.
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "kvgate/core/token.hpp"

namespace kvgate::prefix {

using BlockHash = std::uint64_t;
using TokenId = kvgate::TokenId;

struct Partition {
  std::string_view model;
  std::string_view lora;        // empty: base model
  std::string_view cache_salt;  // empty: unsalted
};

BlockHash partition_seed(const Partition& partition);

// The hash of one full block given its parent's hash (or the partition seed).
BlockHash hash_block(BlockHash parent, std::span<const TokenId> block_tokens);

// Hashes of the leading full blocks of `tokens` (a partial last block is not
// hashed). `block_size` must be > 0.
std::vector<BlockHash> hash_blocks(std::span<const TokenId> tokens, std::uint32_t block_size, BlockHash seed);

}  // namespace kvgate::prefix
