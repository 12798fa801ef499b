#include "block_pool.hpp"

#include <algorithm>
#include <cassert>
#include <utility>

namespace kvgate::sim {

BlockPool::BlockPool(std::uint32_t num_blocks, std::uint32_t block_size)
    : block_size_(block_size), blocks_(num_blocks) {
  for (BlockId block = 0; block < num_blocks; ++block) {
    push_free_tail(block);
  }
}

std::vector<BlockId> BlockPool::find_cached_prefix(std::span<const BlockHash> hashes, std::uint32_t group) const {
  std::vector<BlockId> found;
  for (auto hash : hashes) {
    auto cached = cached_.find(pool_key(hash, group));
    if (cached == cached_.end()) {
      break;
    }
    found.push_back(cached->second.front());
  }
  return found;
}

std::optional<BlockId> BlockPool::cached_block(BlockHash hash, std::uint32_t group) const {
  auto cached = cached_.find(pool_key(hash, group));
  return cached == cached_.end() ? std::nullopt : std::optional(cached->second.front());
}

void BlockPool::touch(std::span<const BlockId> blocks) {
  for (auto block : blocks) {
    if (blocks_[block].ref_count == 0) {
      unlink_free(block);
    }
    ++blocks_[block].ref_count;
  }
}

std::optional<std::vector<BlockId>> BlockPool::allocate(std::uint32_t count) {
  if (count > free_count_) {
    return std::nullopt;
  }
  std::vector<BlockId> allocated;
  allocated.reserve(count);
  for (std::uint32_t index = 0; index < count; ++index) {
    auto block = free_head_;
    unlink_free(block);
    evict_hash(block);
    blocks_[block].ref_count = 1;
    allocated.push_back(block);
  }
  return allocated;
}

void BlockPool::cache_blocks(std::span<const BlockId> blocks, std::span<const BlockHash> hashes,
                             std::optional<BlockHash> parent, std::span<const TokenId> token_ids,
                             std::string_view cache_salt, std::string_view lora_name, std::uint32_t group) {
  assert(blocks.size() == hashes.size());
  assert(token_ids.size() == blocks.size() * block_size_);
  if (blocks.empty()) {
    return;
  }
  for (std::size_t index = 0; index < blocks.size(); ++index) {
    auto& block = blocks_[blocks[index]];
    block.hash = hashes[index];
    block.group = group;
    cached_[pool_key(hashes[index], group)].push_back(blocks[index]);
    if (cpu_capacity_ > 0) {
      block.parent = index == 0 ? parent : std::optional<BlockHash>(hashes[index - 1]);
      block.tokens.assign(token_ids.begin() + static_cast<std::ptrdiff_t>(index * block_size_),
                          token_ids.begin() + static_cast<std::ptrdiff_t>((index + 1) * block_size_));
      block.root_cache_salt = block.parent ? std::string() : std::string(cache_salt);
      block.lora_name = std::string(lora_name);
    }
  }
  BlockStored stored{std::vector<BlockHash>(hashes.begin(), hashes.end()),
                     parent,
                     std::vector<TokenId>(token_ids.begin(), token_ids.end()),
                     block_size_,
                     parent ? std::string() : std::string(cache_salt),
                     Medium::gpu,
                     std::string(lora_name)};
  if (group < groups_.size()) {
    stored.group_idx = group;
    stored.spec_kind = groups_[group].sliding() ? "sliding_window" : "full_attention";
    if (groups_[group].sliding()) {
      stored.sliding_window = groups_[group].window;
    }
  }
  events_.emplace_back(std::move(stored));
}

void BlockPool::release(std::span<const BlockId> blocks) {
  for (auto block : blocks) {
    assert(blocks_[block].ref_count > 0);
    if (--blocks_[block].ref_count == 0) {
      push_free_tail(block);
    }
  }
}

bool BlockPool::reset() {
  if (free_count_ != blocks_.size()) {
    return false;
  }
  for (auto& block : blocks_) {
    block.hash.reset();
  }
  cached_.clear();
  cpu_.clear();
  cpu_lru_.clear();
  events_.emplace_back(AllBlocksCleared{});
  return true;
}

void BlockPool::evict_free_blocks() {
  for (auto block = free_head_; block != kNone; block = blocks_[block].next) {
    evict_hash(block);
  }
}

double BlockPool::usage() const {
  return blocks_.empty() ? 0.0 : 1.0 - static_cast<double>(free_count_) / static_cast<double>(blocks_.size());
}

std::vector<CacheEvent> BlockPool::take_events() {
  return std::exchange(events_, {});
}

void BlockPool::push_free_tail(BlockId block) {
  auto& entry = blocks_[block];
  entry.previous = free_tail_;
  entry.next = kNone;
  entry.free = true;
  if (free_tail_ != kNone) {
    blocks_[free_tail_].next = block;
  } else {
    free_head_ = block;
  }
  free_tail_ = block;
  ++free_count_;
}

void BlockPool::unlink_free(BlockId block) {
  auto& entry = blocks_[block];
  assert(entry.free);
  (entry.previous != kNone ? blocks_[entry.previous].next : free_head_) = entry.next;
  (entry.next != kNone ? blocks_[entry.next].previous : free_tail_) = entry.previous;
  entry.previous = entry.next = kNone;
  entry.free = false;
  --free_count_;
}

void BlockPool::evict_hash(BlockId block) {
  auto& entry = blocks_[block];
  if (!entry.hash) {
    return;
  }
  auto hash = *entry.hash;
  entry.hash.reset();
  auto holders = cached_.find(pool_key(hash, entry.group));
  bool last_copy = true;
  if (holders != cached_.end()) {
    std::erase(holders->second, block);
    last_copy = holders->second.empty();
    if (last_copy) {
      cached_.erase(holders);
    }
  }
  events_.emplace_back(
      BlockRemoved{{hash}, Medium::gpu, entry.group < groups_.size() ? std::optional(entry.group) : std::nullopt});
  if (cpu_capacity_ > 0 && last_copy) {
    offload(hash, entry);
  }
}

void BlockPool::offload(BlockHash hash, const Block& block) {
  if (auto found = cpu_.find(hash); found != cpu_.end()) {
    cpu_lru_.splice(cpu_lru_.end(), cpu_lru_, found->second);
    return;
  }
  cpu_lru_.push_back(hash);
  cpu_.emplace(hash, std::prev(cpu_lru_.end()));
  events_.emplace_back(BlockStored{
      {hash}, block.parent, block.tokens, block_size_, block.root_cache_salt, Medium::cpu, block.lora_name});
  while (cpu_.size() > cpu_capacity_) {
    auto oldest = cpu_lru_.front();
    cpu_lru_.pop_front();
    cpu_.erase(oldest);
    events_.emplace_back(BlockRemoved{{oldest}, Medium::cpu});
  }
}

std::uint32_t BlockPool::offloaded_run(std::span<const BlockHash> hashes) const {
  std::uint32_t run = 0;
  while (run < hashes.size() && cpu_.contains(hashes[run])) {
    ++run;
  }
  return run;
}

void BlockPool::touch_offloaded(std::span<const BlockHash> hashes) {
  for (auto hash : hashes) {
    if (auto found = cpu_.find(hash); found != cpu_.end()) {
      cpu_lru_.splice(cpu_lru_.end(), cpu_lru_, found->second);
    }
  }
}

}  // namespace kvgate::sim
