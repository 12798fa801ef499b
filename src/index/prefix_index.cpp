#include "kvgate/index/prefix_index.hpp"

#include <bit>
#include <cassert>

namespace kvgate::index {
namespace {

std::uint64_t bit(WorkerSlot worker) {
  return std::uint64_t{1} << worker;
}

}  // namespace

std::uint64_t PrefixIndex::insert(WorkerSlot worker, std::span<const BlockHash> blocks, Tier tier, std::uint64_t now) {
  assert(worker < kMaxWorkers);
  for (auto hash : blocks) {
    auto slot = find_or_add(hash);
    auto& block = slots_[slot];
    auto gpu = block.gpu;
    auto offloaded = block.offloaded;
    (tier == Tier::gpu ? gpu : offloaded) |= bit(worker);
    set_bits(block, gpu, offloaded);
    block.touched = now;
    unlink(slot);
    push_newest(slot);
  }
  return evict_over_cap();
}

void PrefixIndex::remove(WorkerSlot worker, std::span<const BlockHash> blocks, Tier tier) {
  for (auto hash : blocks) {
    auto found = by_hash_.find(hash);
    if (found == by_hash_.end()) {
      continue;
    }
    auto& block = slots_[found->second];
    auto gpu = block.gpu;
    auto offloaded = block.offloaded;
    (tier == Tier::gpu ? gpu : offloaded) &= ~bit(worker);
    set_bits(block, gpu, offloaded);
    if ((block.gpu | block.offloaded) == 0) {
      release(found->second);
      by_hash_.erase(found);
    }
  }
}

void PrefixIndex::drop_worker(WorkerSlot worker) {
  for (auto it = by_hash_.begin(); it != by_hash_.end();) {
    auto& block = slots_[it->second];
    set_bits(block, block.gpu & ~bit(worker), block.offloaded & ~bit(worker));
    if ((block.gpu | block.offloaded) == 0) {
      release(it->second);
      it = by_hash_.erase(it);
    } else {
      ++it;
    }
  }
}

PrefixMatch PrefixIndex::longest_prefix(std::span<const BlockHash> blocks) const {
  PrefixMatch match;
  std::uint64_t any = ~std::uint64_t{0};
  std::uint64_t gpu = ~std::uint64_t{0};
  for (std::uint32_t position = 0; position < blocks.size(); ++position) {
    auto found = by_hash_.find(blocks[position]);
    if (found == by_hash_.end()) {
      break;
    }
    const auto& block = slots_[found->second];
    any &= block.gpu | block.offloaded;
    gpu &= block.gpu;
    if (any == 0) {
      break;
    }
    for (auto holders = any; holders != 0; holders &= holders - 1) {
      match.blocks[static_cast<std::size_t>(std::countr_zero(holders))] = position + 1;
    }
    for (auto holders = gpu; holders != 0; holders &= holders - 1) {
      match.gpu_blocks[static_cast<std::size_t>(std::countr_zero(holders))] = position + 1;
    }
  }
  return match;
}

bool PrefixIndex::holds(WorkerSlot worker, BlockHash hash) const {
  auto found = by_hash_.find(hash);
  return found != by_hash_.end() && ((slots_[found->second].gpu | slots_[found->second].offloaded) & bit(worker));
}

std::uint32_t PrefixIndex::find_or_add(BlockHash hash) {
  auto [it, added] = by_hash_.try_emplace(hash, kNone);
  if (!added) {
    return it->second;
  }
  std::uint32_t slot;
  if (!free_.empty()) {
    slot = free_.back();
    free_.pop_back();
    slots_[slot] = Block{};
  } else {
    slot = static_cast<std::uint32_t>(slots_.size());
    slots_.emplace_back();
  }
  slots_[slot].hash = hash;
  it->second = slot;
  push_newest(slot);
  return slot;
}

// Keeps the entry counts in step with the masks: a (block, worker) pair
// counts once whatever tiers hold it.
void PrefixIndex::set_bits(Block& block, std::uint64_t gpu, std::uint64_t offloaded) {
  auto before = block.gpu | block.offloaded;
  auto after = gpu | offloaded;
  for (auto added = after & ~before; added != 0; added &= added - 1) {
    ++per_worker_[static_cast<std::size_t>(std::countr_zero(added))];
    ++entries_;
  }
  for (auto gone = before & ~after; gone != 0; gone &= gone - 1) {
    --per_worker_[static_cast<std::size_t>(std::countr_zero(gone))];
    --entries_;
  }
  block.gpu = gpu;
  block.offloaded = offloaded;
}

void PrefixIndex::release(std::uint32_t slot) {
  set_bits(slots_[slot], 0, 0);
  unlink(slot);
  free_.push_back(slot);
}

void PrefixIndex::unlink(std::uint32_t slot) {
  auto& block = slots_[slot];
  if (block.newer != kNone) {
    slots_[block.newer].older = block.older;
  } else if (newest_ == slot) {
    newest_ = block.older;
  }
  if (block.older != kNone) {
    slots_[block.older].newer = block.newer;
  } else if (oldest_ == slot) {
    oldest_ = block.newer;
  }
  block.older = block.newer = kNone;
}

void PrefixIndex::push_newest(std::uint32_t slot) {
  auto& block = slots_[slot];
  block.older = newest_;
  block.newer = kNone;
  if (newest_ != kNone) {
    slots_[newest_].newer = slot;
  }
  newest_ = slot;
  if (oldest_ == kNone) {
    oldest_ = slot;
  }
}

std::uint64_t PrefixIndex::evict_over_cap() {
  std::uint64_t evicted = 0;
  while (entries_ > max_entries_ && oldest_ != kNone) {
    auto slot = oldest_;
    auto hash = slots_[slot].hash;
    evicted += static_cast<std::uint64_t>(std::popcount(slots_[slot].gpu | slots_[slot].offloaded));
    release(slot);
    by_hash_.erase(hash);
  }
  return evicted;
}

}  // namespace kvgate::index
