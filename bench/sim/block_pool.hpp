#pragma once
// The simulated GPU's paged KV cache with prefix caching, mirroring vLLM v1
// (vllm/v1/core/block_pool.py, kv_cache_utils.py):
// - blocks are handed out from the head of a free queue; freed blocks go to
//   its tail and keep their hash, so they stay matchable until reallocated
//   (eviction = least recently freed first; callers free a request's blocks
//   in reverse, so its tail blocks go first, as vLLM's KVCacheManager does);
// - a block's hash is set when it becomes full (cache_blocks) and dropped
//   when the block is reallocated, which is when BlockRemoved is emitted;
// - one hash may be held by several blocks (two requests computed the same
//   prefix concurrently); each store and each eviction is its own event.
// Pure: no clocks, no I/O. Every state change that vLLM publishes as a KV
// event is queued and returned by take_events().
#include <cstdint>
#include <list>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <variant>
#include <vector>

#include "kvgate/prefix/block_hash.hpp"

namespace kvgate::sim {

using BlockId = std::uint32_t;
using kvgate::TokenId;
using prefix::BlockHash;

// Where a block's KV lives: the GPU's paged cache, or a CPU tier that
// GPU-evicted blocks move to (vLLM's offloading connector, LMCache), which
// the events report as medium "CPU".
enum class Medium : std::uint8_t { gpu, cpu };

struct BlockStored {
  std::vector<BlockHash> block_hashes;
  std::optional<BlockHash> parent_block_hash;
  std::vector<TokenId> token_ids;
  std::uint32_t block_size = 0;
  // The request's cache_salt when the blocks start at the root: vLLM sends
  // it in extra_keys of the first block (it is part of that block's hash).
  std::string root_cache_salt;
  Medium medium = Medium::gpu;
  // The LoRA adapter the request named (vLLM's lora_name); empty: the base model.
  std::string lora_name;
  // A hybrid model's cache group (set only when the pool has groups, as
  // vLLM's hybrid KV cache manager reports them).
  std::optional<std::uint32_t> group_idx;
  std::string spec_kind;
  std::optional<std::uint32_t> sliding_window;
};
struct BlockRemoved {
  std::vector<BlockHash> block_hashes;
  Medium medium = Medium::gpu;
  std::optional<std::uint32_t> group_idx;
};

// One cache group of a hybrid model: full attention, or a sliding window of
// `window` tokens. vLLM keeps one group per attention kind (several of one
// kind when the layers are split into groups of equal size), all drawing
// blocks from one pool; a block hash is cached per group.
struct CacheGroup {
  std::uint32_t window = 0;  // 0: full attention
  [[nodiscard]] bool sliding() const { return window > 0; }
};
struct AllBlocksCleared {};
using CacheEvent = std::variant<BlockStored, BlockRemoved, AllBlocksCleared>;

class BlockPool {
 public:
  BlockPool(std::uint32_t num_blocks, std::uint32_t block_size);

  // The longest run of leading hashes that are cached (in `group`), as
  // blocks holding them. Changes nothing.
  [[nodiscard]] std::vector<BlockId> find_cached_prefix(std::span<const BlockHash> hashes,
                                                        std::uint32_t group = 0) const;
  // The block caching `hash` in `group`, if any.
  [[nodiscard]] std::optional<BlockId> cached_block(BlockHash hash, std::uint32_t group) const;
  // Events name each block's group, kind and window (a hybrid model).
  void describe_groups(std::vector<CacheGroup> groups) { groups_ = std::move(groups); }

  // A CPU tier of `blocks` blocks: the last GPU copy of a hash that is
  // evicted moves there (BlockStored, medium CPU), its least recently used
  // entries are dropped when full (BlockRemoved, medium CPU). 0: none.
  void enable_cpu_tier(std::uint32_t blocks) { cpu_capacity_ = blocks; }
  // How many of `hashes`, from the first, the CPU tier holds.
  [[nodiscard]] std::uint32_t offloaded_run(std::span<const BlockHash> hashes) const;
  // Marks them used (the tier's LRU order).
  void touch_offloaded(std::span<const BlockHash> hashes);
  [[nodiscard]] std::uint32_t offloaded_blocks() const { return static_cast<std::uint32_t>(cpu_.size()); }

  // Takes a reference on each block; a free block leaves the free queue.
  void touch(std::span<const BlockId> blocks);

  // `count` blocks from the head of the free queue, each with one
  // reference; a block that still held a cached hash is evicted (event).
  // Nothing happens when fewer than `count` blocks are free.
  std::optional<std::vector<BlockId>> allocate(std::uint32_t count);

  // Marks newly full blocks as cached: blocks[i] holds hashes[i] and the
  // tokens token_ids[i*block_size, (i+1)*block_size). `parent` is the hash
  // of the block before blocks[0] (none for a prompt's first block).
  void cache_blocks(std::span<const BlockId> blocks, std::span<const BlockHash> hashes, std::optional<BlockHash> parent,
                    std::span<const TokenId> token_ids, std::string_view cache_salt = {},
                    std::string_view lora_name = {}, std::uint32_t group = 0);

  // Drops one reference on each block, in the order given; blocks that
  // reach zero join the tail of the free queue in that order.
  void release(std::span<const BlockId> blocks);

  // Forgets every cached hash (vLLM's reset_prefix_cache). Refused (false)
  // while any block is in use.
  bool reset();

  // Evicts the hash of every free cached block, one BlockRemoved each, as
  // if memory pressure had reallocated them all (fault injection).
  void evict_free_blocks();

  [[nodiscard]] std::uint32_t num_blocks() const { return static_cast<std::uint32_t>(blocks_.size()); }
  [[nodiscard]] std::uint32_t block_size() const { return block_size_; }
  [[nodiscard]] std::uint32_t free_blocks() const { return free_count_; }
  // vllm:kv_cache_usage_perc: share of blocks in use (cached free blocks count as free).
  [[nodiscard]] double usage() const;
  [[nodiscard]] bool is_cached(BlockHash hash, std::uint32_t group = 0) const {
    return cached_.contains(pool_key(hash, group));
  }
  [[nodiscard]] std::uint32_t ref_count(BlockId block) const { return blocks_[block].ref_count; }

  std::vector<CacheEvent> take_events();

 private:
  static constexpr BlockId kNone = UINT32_MAX;
  struct Block {
    std::optional<BlockHash> hash;
    // What an offload event repeats about the block: its parent, tokens and
    // (a root block) the request's cache_salt. Kept only with a CPU tier.
    std::optional<BlockHash> parent;
    std::vector<TokenId> tokens;
    std::string root_cache_salt;
    std::string lora_name;
    std::uint32_t group = 0;
    std::uint32_t ref_count = 0;
    BlockId previous = kNone;  // free-queue links, valid while free
    BlockId next = kNone;
    bool free = false;
  };

  // One hash is cached once per group: the cache's key for it in `group`.
  static BlockHash pool_key(BlockHash hash, std::uint32_t group) {
    return group == 0 ? hash : hash ^ (0x9E3779B97F4A7C15ULL * group);
  }
  void push_free_tail(BlockId block);
  void unlink_free(BlockId block);
  void evict_hash(BlockId block);
  void offload(BlockHash hash, const Block& block);

  std::uint32_t block_size_;
  std::vector<Block> blocks_;
  BlockId free_head_ = kNone;
  BlockId free_tail_ = kNone;
  std::uint32_t free_count_ = 0;
  std::unordered_map<BlockHash, std::vector<BlockId>> cached_;  // by pool_key
  std::vector<CacheGroup> groups_;                              // empty: one group, events without group fields
  std::vector<CacheEvent> events_;
  std::uint32_t cpu_capacity_ = 0;
  std::list<BlockHash> cpu_lru_;  // least recently used first
  std::unordered_map<BlockHash, std::list<BlockHash>::iterator> cpu_;
};

}  // namespace kvgate::sim
