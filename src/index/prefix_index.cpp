#include "kvgate/index/prefix_index.hpp"

#include <algorithm>
#include <array>
#include <bit>
#include <cassert>
#include <optional>
#include <thread>

namespace kvgate::index {
namespace {

constexpr std::uint64_t kMinimumCapacity = 1024;
// Key 0 marks an empty slot; a block whose hash is 0 is stored under this
// stand-in instead (one in 2^64 blocks, and both sides map it the same way).
constexpr std::uint64_t kZeroHashKey = 0x9E3779B97F4A7C15ULL;

std::uint32_t word_of(WorkerSlot worker) {
  return static_cast<std::uint32_t>(worker / kWorkersPerWord);
}

std::uint64_t bit(WorkerSlot worker) {
  return std::uint64_t{1} << (worker % kWorkersPerWord);
}

__extension__ using Uint128 = unsigned __int128;  // GCC and Clang; multiply-shift needs the high half

std::uint64_t key_of(BlockHash hash) {
  return hash == 0 ? kZeroHashKey : hash;
}

}  // namespace

struct PrefixIndex::Table {
  struct Recency {  // writer-only
    std::uint32_t touched = 0;
    std::uint32_t older = kNone;  // towards the oldest
    std::uint32_t newer = kNone;
  };

  // A slot is `stride` words: its key, then the GPU mask's words, then the
  // offloaded mask's (workers with a copy on another tier).
  Table(std::uint64_t slot_count, std::uint32_t mask_words)
      : capacity(slot_count),
        words(mask_words),
        stride(1 + 2 * static_cast<std::uint64_t>(mask_words)),
        cells(new std::atomic<std::uint64_t>[slot_count * stride]()),
        recency(slot_count) {}

  [[nodiscard]] std::atomic<std::uint64_t>& key(std::uint64_t slot) const { return cells[slot * stride]; }
  [[nodiscard]] std::atomic<std::uint64_t>& gpu(std::uint64_t slot, std::uint32_t word) const {
    return cells[slot * stride + 1 + word];
  }
  [[nodiscard]] std::atomic<std::uint64_t>& offloaded(std::uint64_t slot, std::uint32_t word) const {
    return cells[slot * stride + 1 + words + word];
  }
  [[nodiscard]] std::uint64_t holders(std::uint64_t slot, std::uint32_t word) const {
    return gpu(slot, word).load(std::memory_order_relaxed) | offloaded(slot, word).load(std::memory_order_relaxed);
  }

  // Home slot: Fibonacci hashing spreads keys that are not uniform (small
  // integers in tests, engine hashes), then multiply-shift maps onto any
  // capacity, so tables need not be powers of two.
  [[nodiscard]] std::uint64_t home(std::uint64_t hashed) const {
    const std::uint64_t mixed = hashed * 0x9E3779B97F4A7C15ULL;
    return static_cast<std::uint64_t>((static_cast<Uint128>(mixed) * capacity) >> 64);
  }
  [[nodiscard]] std::uint64_t next(std::uint64_t slot) const { return slot + 1 == capacity ? 0 : slot + 1; }

  // Reader-safe probe: the slot holding `hashed`, or capacity when absent.
  [[nodiscard]] std::uint64_t find(std::uint64_t hashed) const {
    for (auto slot = home(hashed);; slot = next(slot)) {
      auto stored = key(slot).load(std::memory_order_acquire);
      if (stored == hashed) {
        return slot;
      }
      if (stored == 0) {
        return capacity;
      }
    }
  }

  std::uint64_t capacity;
  std::uint32_t words;
  std::uint64_t stride;
  std::unique_ptr<std::atomic<std::uint64_t>[]> cells;
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
  tables_.push_back(std::make_unique<Table>(kMinimumCapacity, 1));
  table_ = tables_.back().get();
  published_.store(table_);
}

PrefixIndex::~PrefixIndex() = default;

std::uint64_t PrefixIndex::capacity_slots() const {
  ReadGuard table(published_);
  return table->capacity;
}

std::uint32_t PrefixIndex::mask_words() const {
  ReadGuard table(published_);
  return table->words;
}

std::uint64_t PrefixIndex::insert(WorkerSlot worker, std::span<const BlockHash> blocks, Tier tier, std::uint32_t now) {
  assert(worker < kMaxWorkers);
  widen_for(worker);
  const auto word = word_of(worker);
  for (auto hash : blocks) {
    auto slot = find_or_claim(key_of(hash));
    auto gpu = table_->gpu(slot, word).load(std::memory_order_relaxed);
    auto offloaded = table_->offloaded(slot, word).load(std::memory_order_relaxed);
    (tier == Tier::gpu ? gpu : offloaded) |= bit(worker);
    const bool was_live = live(slot);
    set_word(slot, word, gpu, offloaded);
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
  const auto word = word_of(worker);
  if (word >= table_->words) {
    return;  // never inserted: the width follows the highest slot inserted
  }
  for (auto hash : blocks) {
    auto slot = table_->find(key_of(hash));
    if (slot == table_->capacity) {
      continue;
    }
    auto position = static_cast<std::uint32_t>(slot);
    auto gpu = table_->gpu(slot, word).load(std::memory_order_relaxed);
    auto offloaded = table_->offloaded(slot, word).load(std::memory_order_relaxed);
    if (((gpu | offloaded) & bit(worker)) == 0) {
      continue;
    }
    (tier == Tier::gpu ? gpu : offloaded) &= ~bit(worker);
    set_word(position, word, gpu, offloaded);
    if (!live(position)) {
      retire(position);
    }
  }
}

void PrefixIndex::drop_worker(WorkerSlot worker) {
  const auto word = word_of(worker);
  if (word >= table_->words) {
    return;
  }
  for (auto slot = oldest_; slot != kNone;) {
    auto newer = table_->recency[slot].newer;
    auto gpu = table_->gpu(slot, word).load(std::memory_order_relaxed) & ~bit(worker);
    auto offloaded = table_->offloaded(slot, word).load(std::memory_order_relaxed) & ~bit(worker);
    set_word(slot, word, gpu, offloaded);
    if (!live(slot)) {
      retire(slot);
    }
    slot = newer;
  }
}

std::uint32_t PrefixIndex::touched(BlockHash block) const {
  auto slot = table_->find(key_of(block));
  return slot == table_->capacity ? 0 : table_->recency[slot].touched;
}

void PrefixIndex::longest_prefix(std::span<const BlockHash> blocks, PrefixMatch& match) const {
  ReadGuard guard(published_);
  // A fleet of up to 64 workers (the common case) walks with the stride
  // and the word loop known at compile time.
  if (guard->words == 1) {
    walk<1>(*guard, blocks, match);
  } else {
    walk<0>(*guard, blocks, match);
  }
}

template <std::uint32_t FixedWords>
void PrefixIndex::walk(const Table& table, std::span<const BlockHash> blocks, PrefixMatch& match) {
  const std::uint32_t words = FixedWords != 0 ? FixedWords : table.words;
  const std::uint64_t stride = 1 + 2 * static_cast<std::uint64_t>(words);
  match.blocks.assign(words * kWorkersPerWord, 0);
  match.gpu_blocks.assign(words * kWorkersPerWord, 0);
  // Per word, the workers whose run is still unbroken (any tier, GPU tier);
  // `open` lists the words with any such worker left, so a lookup over a
  // wide fleet only pays for the words whose workers still match.
  // Left uninitialised on purpose: only the first `words` entries are used,
  // and the loop below writes them first (zeroing all 64 would add 1.3 KB
  // of stores to every lookup, most of them for words no fleet uses).
  std::array<std::uint64_t, kMaxWords> any;   // NOLINT(cppcoreguidelines-pro-type-member-init)
  std::array<std::uint64_t, kMaxWords> gpu;   // NOLINT(cppcoreguidelines-pro-type-member-init)
  std::array<std::uint32_t, kMaxWords> open;  // NOLINT(cppcoreguidelines-pro-type-member-init)
  for (std::uint32_t word = 0; word < words; ++word) {
    any[word] = gpu[word] = ~std::uint64_t{0};
    open[word] = word;
  }
  std::uint32_t open_words = words;
  std::uint32_t position = 0;
  // A worker's run ends where its bit leaves the running mask: record the
  // position once per worker instead of incrementing per block (position 0
  // is already recorded by the zero fill).
  auto record = [&](std::uint32_t word, std::uint64_t leaving_any, std::uint64_t leaving_gpu) {
    if (position == 0) {
      return;
    }
    const auto base = static_cast<std::size_t>(word) * kWorkersPerWord;
    for (; leaving_any != 0; leaving_any &= leaving_any - 1) {
      match.blocks[base + static_cast<std::size_t>(std::countr_zero(leaving_any))] = position;
    }
    for (; leaving_gpu != 0; leaving_gpu &= leaving_gpu - 1) {
      match.gpu_blocks[base + static_cast<std::size_t>(std::countr_zero(leaving_gpu))] = position;
    }
  };
  // The blocks' slots are scattered over the table: fetch the home slots
  // of the blocks a few positions ahead while this one is read, so that a
  // wide slot (264 bytes at 1,000 workers) is not waited for line by line.
  // Only the key and the GPU words: the offloaded words are read only for
  // a block where an open worker lacks a GPU copy (below).
  constexpr std::size_t kPrefetchAhead = 4;
  const std::size_t slot_bytes = (1 + static_cast<std::size_t>(words)) * sizeof(std::uint64_t);
  auto prefetch = [&](std::size_t ahead) {
    const auto* first = reinterpret_cast<const char*>(&table.cells[table.home(key_of(blocks[ahead])) * stride]);
    for (std::size_t offset = 0; offset < slot_bytes; offset += 64) {
      __builtin_prefetch(first + offset);
    }
  };
  for (std::size_t ahead = 0; ahead < std::min(kPrefetchAhead, blocks.size()); ++ahead) {
    prefetch(ahead);
  }
  for (; position < blocks.size() && open_words != 0; ++position) {
    if (position + kPrefetchAhead < blocks.size()) {
      prefetch(position + kPrefetchAhead);
    }
    const auto slot = table.find(key_of(blocks[position]));
    const auto* masks = slot != table.capacity ? &table.cells[slot * stride + 1] : nullptr;
    if (masks != nullptr) {
      // Most blocks end no worker's run (a shared prefix is held by the
      // same workers block after block): branch-free passes find that
      // first, and only a block that ends a run pays for the update below.
      // When every open worker holds the block on the GPU (any & ~gpu == 0;
      // the GPU run is a subset of the any-tier run) nothing ends, and the
      // offloaded words, half of a slot, are not read at all.
      std::uint64_t lacking_gpu = 0;
      for (std::uint32_t index = 0; index < open_words; ++index) {
        const auto word = open[index];
        lacking_gpu |= any[word] & ~masks[word].load(std::memory_order_relaxed);
      }
      if (lacking_gpu == 0) {
        continue;
      }
      std::uint64_t ending = 0;
      for (std::uint32_t index = 0; index < open_words; ++index) {
        const auto word = open[index];
        const auto block_gpu = masks[word].load(std::memory_order_relaxed);
        const auto block_offloaded = masks[words + word].load(std::memory_order_relaxed);
        ending |= (any[word] & ~(block_gpu | block_offloaded)) | (gpu[word] & ~block_gpu);
      }
      if (ending == 0) {
        continue;
      }
    }
    for (std::uint32_t index = 0; index < open_words;) {
      const auto word = open[index];
      std::uint64_t block_gpu = 0;
      std::uint64_t block_offloaded = 0;
      if (masks != nullptr) {
        block_gpu = masks[word].load(std::memory_order_relaxed);
        block_offloaded = masks[words + word].load(std::memory_order_relaxed);
      }
      // The GPU run is a subset of the any-tier run, so an empty any-tier
      // mask closes the word.
      auto next_any = any[word] & (block_gpu | block_offloaded);
      auto next_gpu = gpu[word] & block_gpu;
      record(word, any[word] & ~next_any, gpu[word] & ~next_gpu);
      any[word] = next_any;
      gpu[word] = next_gpu;
      if (next_any == 0) {
        open[index] = open[--open_words];
      } else {
        ++index;
      }
    }
  }
  for (std::uint32_t index = 0; index < open_words; ++index) {
    record(open[index], any[open[index]], gpu[open[index]]);
  }
}

void PrefixIndex::limit_to_local_attention(std::span<const BlockHash> blocks, const prefix::LocalAttention& attention,
                                           std::uint32_t block_size, std::uint32_t reusable_blocks,
                                           PrefixMatch& match) const {
  const auto limit = std::min<std::size_t>(reusable_blocks, blocks.size());
  auto& scanning = match.scanning;
  scanning.clear();
  std::uint32_t highest = 0;
  for (std::size_t worker = 0; worker < match.blocks.size(); ++worker) {
    auto& run = match.blocks[worker];
    run = std::min<std::uint32_t>(run, static_cast<std::uint32_t>(limit));
    match.gpu_blocks[worker] = std::min(match.gpu_blocks[worker], run);
    if (run > 0 && attention.hybrid()) {
      scanning.push_back(static_cast<WorkerSlot>(worker));
      highest = std::max(highest, run);
    }
  }
  if (scanning.empty()) {
    return;
  }
  ReadGuard table(published_);
  auto local_held = [&](std::uint64_t slot, WorkerSlot worker) {
    const auto word = word_of(worker);
    return slot != table->capacity && word < table->words && (table->holders(slot, word) & bit(worker)) != 0;
  };
  auto settle = [&](WorkerSlot worker, std::uint32_t hit) {
    match.blocks[worker] = hit;
    match.gpu_blocks[worker] = std::min(match.gpu_blocks[worker], hit);
  };
  if (attention.kind == prefix::AttentionKind::chunked_local) {
    for (auto worker : scanning) {
      settle(worker, prefix::hybrid_hit_blocks(attention, block_size, match.blocks[worker], [&](std::uint32_t block) {
               return local_held(table->find(key_of(prefix::local_group_key(blocks[block]))), worker);
             }));
    }
    return;
  }
  // Sliding window, per worker: the highest run of `needed` held blocks
  // ending at or below its full run, else its held run from block 0 (the
  // rule of prefix::hybrid_hit_blocks). Every run ending in (end - needed,
  // end] holds block end - needed, so that block is read first and a miss
  // there moves the search down a whole window; a miss above it moves the
  // search to just below the miss. A held window costs `needed` probes, and
  // the slots of the blocks below are fetched while one is read.
  const std::uint32_t needed = std::max<std::uint32_t>(1, (attention.tokens - 1 + block_size - 1) / block_size);
  constexpr std::uint32_t kPrefetchBelow = 8;
  for (auto worker : scanning) {
    auto held = [&](std::uint32_t block) {
      return local_held(table->find(key_of(prefix::local_group_key(blocks[block]))), worker);
    };
    auto prefetch = [&](std::uint32_t block) {
      __builtin_prefetch(&table->cells[table->home(key_of(prefix::local_group_key(blocks[block]))) * table->stride]);
    };
    std::uint32_t end = match.blocks[worker];
    std::optional<std::uint32_t> hit;
    while (!hit && end >= needed) {
      const auto start = end - needed;
      if (!held(start)) {
        end = start;
        continue;
      }
      std::optional<std::uint32_t> miss;
      for (auto block = end; block-- > start + 1;) {
        if (block >= start + kPrefetchBelow) {
          prefetch(block - kPrefetchBelow);
        }
        if (!held(block)) {
          miss = block;
          break;
        }
      }
      if (miss) {
        end = *miss;
      } else {
        hit = end;
      }
    }
    if (!hit) {
      std::uint32_t leading = 0;  // shorter than a window: the run from the first block
      while (leading < end && held(leading)) {
        ++leading;
      }
      hit = leading;
    }
    settle(worker, *hit);
  }
}

bool PrefixIndex::holds(WorkerSlot worker, BlockHash block) const {
  ReadGuard table(published_);
  const auto word = word_of(worker);
  if (word >= table->words) {
    return false;
  }
  auto slot = table->find(key_of(block));
  return slot != table->capacity && (table->holders(slot, word) & bit(worker)) != 0;
}

// The writer's mask width follows the highest slot inserted; a wider table
// is built like a grown one (same capacity), so readers switch at one
// pointer store.
void PrefixIndex::widen_for(WorkerSlot worker) {
  const auto needed = word_of(worker) + 1;
  if (needed > table_->words) {
    rebuild(table_->capacity, needed);
  }
}

bool PrefixIndex::live(std::uint32_t slot) const {
  for (std::uint32_t word = 0; word < table_->words; ++word) {
    if (table_->holders(slot, word) != 0) {
      return true;
    }
  }
  return false;
}

std::uint32_t PrefixIndex::find_or_claim(std::uint64_t hashed) {
  auto found = table_->find(hashed);
  if (found != table_->capacity) {
    return static_cast<std::uint32_t>(found);
  }
  // Keep keyed slots under 85% (linear probing degrades beyond): rebuild
  // from the live blocks so that they fill 60% of the new table (tombstones
  // are dropped on the way). At one word per mask, 36 bytes per slot / 0.6
  // = 60 bytes per block at most right after a rebuild.
  if ((table_->keyed + 1) * 20 > table_->capacity * 17) {
    auto live_count = live_blocks_.load(std::memory_order_relaxed) + 1;
    rebuild(std::max(kMinimumCapacity, live_count * 5 / 3), table_->words);
  }
  auto slot = table_->home(hashed);
  while (table_->key(slot).load(std::memory_order_relaxed) != 0) {
    slot = table_->next(slot);
  }
  table_->key(slot).store(hashed, std::memory_order_release);
  ++table_->keyed;
  return static_cast<std::uint32_t>(slot);
}

// Keeps the entry counts in step with the masks: a (block, worker) pair
// counts once whatever tiers hold it.
void PrefixIndex::set_word(std::uint32_t slot, std::uint32_t word, std::uint64_t gpu, std::uint64_t offloaded) {
  auto before = table_->holders(slot, word);
  auto after = gpu | offloaded;
  const auto base = static_cast<std::size_t>(word) * kWorkersPerWord;
  for (auto added = after & ~before; added != 0; added &= added - 1) {
    per_worker_[base + static_cast<std::size_t>(std::countr_zero(added))].fetch_add(1, std::memory_order_relaxed);
    entries_.fetch_add(1, std::memory_order_relaxed);
  }
  for (auto gone = before & ~after; gone != 0; gone &= gone - 1) {
    per_worker_[base + static_cast<std::size_t>(std::countr_zero(gone))].fetch_sub(1, std::memory_order_relaxed);
    entries_.fetch_sub(1, std::memory_order_relaxed);
  }
  table_->gpu(slot, word).store(gpu, std::memory_order_relaxed);
  table_->offloaded(slot, word).store(offloaded, std::memory_order_relaxed);
}

// The block has no holder left: it leaves the LRU and stays as a tombstone.
void PrefixIndex::retire(std::uint32_t slot) {
  for (std::uint32_t word = 0; word < table_->words; ++word) {
    set_word(slot, word, 0, 0);
  }
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
    for (std::uint32_t word = 0; word < table_->words; ++word) {
      evicted += static_cast<std::uint64_t>(std::popcount(table_->holders(slot, word)));
    }
    retire(slot);
  }
  return evicted;
}

// Copies the live blocks, oldest first, into a fresh table (`words` per
// mask, at least the current width); readers keep using the old one until
// the pointer swap.
void PrefixIndex::rebuild(std::uint64_t capacity, std::uint32_t words) {
  auto fresh = std::make_unique<Table>(capacity, words);
  std::uint32_t fresh_newest = kNone;
  std::uint32_t fresh_oldest = kNone;
  for (auto slot = oldest_; slot != kNone; slot = table_->recency[slot].newer) {
    auto hashed = table_->key(slot).load(std::memory_order_relaxed);
    auto target = fresh->home(hashed);
    while (fresh->key(target).load(std::memory_order_relaxed) != 0) {
      target = fresh->next(target);
    }
    for (std::uint32_t word = 0; word < table_->words; ++word) {
      fresh->gpu(target, word)
          .store(table_->gpu(slot, word).load(std::memory_order_relaxed), std::memory_order_relaxed);
      fresh->offloaded(target, word)
          .store(table_->offloaded(slot, word).load(std::memory_order_relaxed), std::memory_order_relaxed);
    }
    fresh->key(target).store(hashed, std::memory_order_relaxed);
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
  retired->cells.reset();
  std::vector<Table::Recency>().swap(retired->recency);  // assigning {} would keep the capacity
  newest_ = fresh_newest;
  oldest_ = fresh_oldest;
}

}  // namespace kvgate::index
