#include "kvgate/index/prefix_index.hpp"

#include <algorithm>
#include <bit>
#include <cassert>
#include <thread>

namespace kvgate::index {
namespace {

constexpr std::uint64_t kMinimumCapacity = 1024;
// Key 0 marks an empty slot; a block whose hash is 0 is stored under this
// stand-in instead (one in 2^64 blocks, and both sides map it the same way).
constexpr std::uint64_t kZeroHashKey = 0x9E3779B97F4A7C15ULL;

std::uint64_t bit(WorkerSlot worker) {
  return std::uint64_t{1} << worker;
}

__extension__ using Uint128 = unsigned __int128;  // GCC and Clang; multiply-shift needs the high half

std::uint64_t key_of(BlockHash hash) {
  return hash == 0 ? kZeroHashKey : hash;
}

}  // namespace

struct PrefixIndex::Table {
  struct Slot {
    std::atomic<std::uint64_t> key{0};
    std::atomic<std::uint64_t> gpu{0};        // workers with a GPU copy
    std::atomic<std::uint64_t> offloaded{0};  // workers with another tier's copy
  };
  struct Recency {  // writer-only
    std::uint32_t touched = 0;
    std::uint32_t older = kNone;  // towards the oldest
    std::uint32_t newer = kNone;
  };

  explicit Table(std::uint64_t slot_count) : capacity(slot_count), slots(new Slot[slot_count]), recency(slot_count) {}

  // Home slot: Fibonacci hashing spreads keys that are not uniform (small
  // integers in tests, engine hashes), then multiply-shift maps onto any
  // capacity, so tables need not be powers of two.
  [[nodiscard]] std::uint64_t home(std::uint64_t key) const {
    const std::uint64_t mixed = key * 0x9E3779B97F4A7C15ULL;
    return static_cast<std::uint64_t>((static_cast<Uint128>(mixed) * capacity) >> 64);
  }
  [[nodiscard]] std::uint64_t next(std::uint64_t slot) const { return slot + 1 == capacity ? 0 : slot + 1; }

  // Reader-safe probe: the slot holding `key`, or capacity when absent.
  [[nodiscard]] std::uint64_t find(std::uint64_t key) const {
    for (auto slot = home(key);; slot = next(slot)) {
      auto stored = slots[slot].key.load(std::memory_order_acquire);
      if (stored == key) {
        return slot;
      }
      if (stored == 0) {
        return capacity;
      }
    }
  }

  std::uint64_t capacity;
  std::unique_ptr<Slot[]> slots;
  std::vector<Recency> recency;
  std::uint64_t keyed = 0;  // slots with a key (live blocks and tombstones)
  mutable std::atomic<std::uint64_t> readers{0};
};

// A reader's hold on the published table: count in, then check the table is
// still the published one (else count out and retry). The writer frees a
// retired table's arrays only after its count is zero, and every reader that
// counted in after that sees the new pointer on its re-check.
class PrefixIndex::ReadGuard {
 public:
  explicit ReadGuard(const std::atomic<const Table*>& published) {
    for (;;) {
      table_ = published.load(std::memory_order_seq_cst);
      table_->readers.fetch_add(1, std::memory_order_seq_cst);
      if (published.load(std::memory_order_seq_cst) == table_) {
        return;
      }
      table_->readers.fetch_sub(1, std::memory_order_seq_cst);
    }
  }
  ~ReadGuard() { table_->readers.fetch_sub(1, std::memory_order_release); }
  ReadGuard(const ReadGuard&) = delete;
  ReadGuard& operator=(const ReadGuard&) = delete;
  const Table& operator*() const { return *table_; }
  const Table* operator->() const { return table_; }

 private:
  const Table* table_;
};

PrefixIndex::PrefixIndex(std::uint64_t max_entries) : max_entries_(max_entries) {
  tables_.push_back(std::make_unique<Table>(kMinimumCapacity));
  table_ = tables_.back().get();
  published_.store(table_);
}

PrefixIndex::~PrefixIndex() = default;

std::uint64_t PrefixIndex::capacity_slots() const {
  ReadGuard table(published_);
  return table->capacity;
}

std::uint64_t PrefixIndex::insert(WorkerSlot worker, std::span<const BlockHash> blocks, Tier tier, std::uint32_t now) {
  assert(worker < kMaxWorkers);
  for (auto hash : blocks) {
    auto slot = find_or_claim(key_of(hash));
    auto& entry = table_->slots[slot];
    auto gpu = entry.gpu.load(std::memory_order_relaxed);
    auto offloaded = entry.offloaded.load(std::memory_order_relaxed);
    (tier == Tier::gpu ? gpu : offloaded) |= bit(worker);
    const bool was_live =
        (entry.gpu.load(std::memory_order_relaxed) | entry.offloaded.load(std::memory_order_relaxed)) != 0;
    set_bits(slot, gpu, offloaded);
    if (was_live) {
      unlink(slot);
    } else {
      live_blocks_.fetch_add(1, std::memory_order_relaxed);
    }
    table_->recency[slot].touched = now;
    push_newest(slot);
  }
  return evict_over_cap();
}

void PrefixIndex::remove(WorkerSlot worker, std::span<const BlockHash> blocks, Tier tier) {
  for (auto hash : blocks) {
    auto slot = table_->find(key_of(hash));
    if (slot == table_->capacity) {
      continue;
    }
    auto& entry = table_->slots[slot];
    auto gpu = entry.gpu.load(std::memory_order_relaxed);
    auto offloaded = entry.offloaded.load(std::memory_order_relaxed);
    if (((gpu | offloaded) & bit(worker)) == 0) {
      continue;
    }
    (tier == Tier::gpu ? gpu : offloaded) &= ~bit(worker);
    set_bits(slot, gpu, offloaded);
    if ((gpu | offloaded) == 0) {
      retire(static_cast<std::uint32_t>(slot));
    }
  }
}

void PrefixIndex::drop_worker(WorkerSlot worker) {
  for (auto slot = oldest_; slot != kNone;) {
    auto newer = table_->recency[slot].newer;
    auto& entry = table_->slots[slot];
    auto gpu = entry.gpu.load(std::memory_order_relaxed) & ~bit(worker);
    auto offloaded = entry.offloaded.load(std::memory_order_relaxed) & ~bit(worker);
    set_bits(slot, gpu, offloaded);
    if ((gpu | offloaded) == 0) {
      retire(slot);
    }
    slot = newer;
  }
}

std::uint32_t PrefixIndex::touched(BlockHash block) const {
  auto slot = table_->find(key_of(block));
  return slot == table_->capacity ? 0 : table_->recency[slot].touched;
}

PrefixMatch PrefixIndex::longest_prefix(std::span<const BlockHash> blocks) const {
  PrefixMatch match;
  ReadGuard guard(published_);
  const auto& table = *guard;
  std::uint64_t any = ~std::uint64_t{0};
  std::uint64_t gpu = ~std::uint64_t{0};
  std::uint32_t position = 0;
  // A worker's run ends where its bit leaves the running mask: record the
  // position once per worker instead of incrementing per block.
  auto record = [&](std::uint64_t leaving_any, std::uint64_t leaving_gpu) {
    for (; leaving_any != 0; leaving_any &= leaving_any - 1) {
      match.blocks[static_cast<std::size_t>(std::countr_zero(leaving_any))] = position;
    }
    for (; leaving_gpu != 0; leaving_gpu &= leaving_gpu - 1) {
      match.gpu_blocks[static_cast<std::size_t>(std::countr_zero(leaving_gpu))] = position;
    }
  };
  for (; position < blocks.size() && any != 0; ++position) {
    auto slot = table.find(key_of(blocks[position]));
    std::uint64_t block_gpu = 0;
    std::uint64_t block_offloaded = 0;
    if (slot != table.capacity) {
      block_gpu = table.slots[slot].gpu.load(std::memory_order_relaxed);
      block_offloaded = table.slots[slot].offloaded.load(std::memory_order_relaxed);
    }
    auto next_any = any & (block_gpu | block_offloaded);
    auto next_gpu = gpu & block_gpu;
    record(any & ~next_any, gpu & ~next_gpu);
    any = next_any;
    gpu = next_gpu;
  }
  record(any, gpu);
  return match;
}

bool PrefixIndex::holds(WorkerSlot worker, BlockHash block) const {
  ReadGuard table(published_);
  auto slot = table->find(key_of(block));
  if (slot == table->capacity) {
    return false;
  }
  const auto& entry = table->slots[slot];
  return ((entry.gpu.load(std::memory_order_relaxed) | entry.offloaded.load(std::memory_order_relaxed)) &
          bit(worker)) != 0;
}

std::uint32_t PrefixIndex::find_or_claim(std::uint64_t key) {
  auto found = table_->find(key);
  if (found != table_->capacity) {
    return static_cast<std::uint32_t>(found);
  }
  // Keep keyed slots under 85% (linear probing degrades beyond): rebuild
  // from the live blocks so that they fill 60% of the new table (tombstones
  // are dropped on the way). 36 bytes per slot / 0.6 = 60 bytes per block at
  // most right after a rebuild.
  if ((table_->keyed + 1) * 20 > table_->capacity * 17) {
    auto live = live_blocks_.load(std::memory_order_relaxed) + 1;
    rebuild(std::max(kMinimumCapacity, live * 5 / 3));
  }
  auto slot = table_->home(key);
  while (table_->slots[slot].key.load(std::memory_order_relaxed) != 0) {
    slot = table_->next(slot);
  }
  table_->slots[slot].key.store(key, std::memory_order_release);
  ++table_->keyed;
  return static_cast<std::uint32_t>(slot);
}

// Keeps the entry counts in step with the masks: a (block, worker) pair
// counts once whatever tiers hold it.
void PrefixIndex::set_bits(std::uint32_t slot, std::uint64_t gpu, std::uint64_t offloaded) {
  auto& entry = table_->slots[slot];
  auto before = entry.gpu.load(std::memory_order_relaxed) | entry.offloaded.load(std::memory_order_relaxed);
  auto after = gpu | offloaded;
  for (auto added = after & ~before; added != 0; added &= added - 1) {
    per_worker_[static_cast<std::size_t>(std::countr_zero(added))].fetch_add(1, std::memory_order_relaxed);
    entries_.fetch_add(1, std::memory_order_relaxed);
  }
  for (auto gone = before & ~after; gone != 0; gone &= gone - 1) {
    per_worker_[static_cast<std::size_t>(std::countr_zero(gone))].fetch_sub(1, std::memory_order_relaxed);
    entries_.fetch_sub(1, std::memory_order_relaxed);
  }
  entry.gpu.store(gpu, std::memory_order_relaxed);
  entry.offloaded.store(offloaded, std::memory_order_relaxed);
}

// The block has no holder left: it leaves the LRU and stays as a tombstone.
void PrefixIndex::retire(std::uint32_t slot) {
  set_bits(slot, 0, 0);
  unlink(slot);
  live_blocks_.fetch_sub(1, std::memory_order_relaxed);
}

void PrefixIndex::unlink(std::uint32_t slot) {
  auto& links = table_->recency;
  auto& block = links[slot];
  if (block.newer != kNone) {
    links[block.newer].older = block.older;
  } else if (newest_ == slot) {
    newest_ = block.older;
  }
  if (block.older != kNone) {
    links[block.older].newer = block.newer;
  } else if (oldest_ == slot) {
    oldest_ = block.newer;
  }
  block.older = block.newer = kNone;
}

void PrefixIndex::push_newest(std::uint32_t slot) {
  auto& links = table_->recency;
  links[slot].older = newest_;
  links[slot].newer = kNone;
  if (newest_ != kNone) {
    links[newest_].newer = slot;
  }
  newest_ = slot;
  if (oldest_ == kNone) {
    oldest_ = slot;
  }
}

std::uint64_t PrefixIndex::evict_over_cap() {
  std::uint64_t evicted = 0;
  while (entries_.load(std::memory_order_relaxed) > max_entries_.load(std::memory_order_relaxed) && oldest_ != kNone) {
    auto slot = oldest_;
    const auto& entry = table_->slots[slot];
    evicted += static_cast<std::uint64_t>(
        std::popcount(entry.gpu.load(std::memory_order_relaxed) | entry.offloaded.load(std::memory_order_relaxed)));
    retire(slot);
  }
  return evicted;
}

// Copies the live blocks, oldest first, into a fresh table; readers keep
// using the old one until the pointer swap.
void PrefixIndex::rebuild(std::uint64_t capacity) {
  auto fresh = std::make_unique<Table>(capacity);
  std::uint32_t fresh_newest = kNone;
  std::uint32_t fresh_oldest = kNone;
  for (auto slot = oldest_; slot != kNone; slot = table_->recency[slot].newer) {
    const auto& entry = table_->slots[slot];
    auto key = entry.key.load(std::memory_order_relaxed);
    auto target = fresh->home(key);
    while (fresh->slots[target].key.load(std::memory_order_relaxed) != 0) {
      target = fresh->next(target);
    }
    auto& copy = fresh->slots[target];
    copy.gpu.store(entry.gpu.load(std::memory_order_relaxed), std::memory_order_relaxed);
    copy.offloaded.store(entry.offloaded.load(std::memory_order_relaxed), std::memory_order_relaxed);
    copy.key.store(key, std::memory_order_relaxed);
    ++fresh->keyed;
    auto position = static_cast<std::uint32_t>(target);
    fresh->recency[position] = {table_->recency[slot].touched, fresh_newest, kNone};
    if (fresh_newest != kNone) {
      fresh->recency[fresh_newest].newer = position;
    } else {
      fresh_oldest = position;
    }
    fresh_newest = position;
  }
  auto* retired = table_;
  tables_.push_back(std::move(fresh));
  table_ = tables_.back().get();
  published_.store(table_, std::memory_order_seq_cst);
  // Readers still inside the old table finish within one lookup; new ones
  // find the new pointer. Then the old arrays can go.
  while (retired->readers.load(std::memory_order_seq_cst) != 0) {
    std::this_thread::yield();
  }
  retired->slots.reset();
  std::vector<Table::Recency>().swap(retired->recency);  // assigning {} would keep the capacity
  newest_ = fresh_newest;
  oldest_ = fresh_oldest;
}

}  // namespace kvgate::index
