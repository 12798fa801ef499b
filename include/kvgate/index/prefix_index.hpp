#pragma once
// Which workers hold which blocks: block hash -> bitmask of workers (one
// mask for GPU copies, one for offloaded copies, each as many 64-bit words
// as the highest slot in use needs), with an LRU over blocks and a cap on
// (block, worker) entries.
//
// Concurrency: one writer thread, any number of reader threads, and readers
// never wait behind the writer's updates.
// - The table is open addressing with linear probing. A slot's key is
//   written once (release) and never changes while the table lives; its two
//   masks are atomics the writer updates in place. A reader that finds the
//   key sees a current (or just previous) mask, never a torn one.
// - A block whose masks drop to zero stays as a keyed tombstone (reused if
//   the same block comes back). When keys fill 85% of the slots the writer
//   builds a new table from the live blocks (sized so they fill 60% of it),
//   publishes it with one atomic pointer store, waits until no reader is
//   still inside the old one, and frees the old arrays. Readers announce
//   themselves with a per-table counter and re-check the pointer, so they
//   never wait: no lock anywhere on the read side.
// - Recency (the LRU links and last-touch time) is writer-only.
// - The mask width grows with the highest worker slot inserted: the writer
//   rebuilds the table one word wider, the same way it grows it. A fleet of
//   up to 64 workers pays for one word per tier, as before the widening.
// Workers are slots 0..kMaxWorkers-1 of one index (one index per model).
#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "kvgate/prefix/attention.hpp"
#include "kvgate/prefix/block_hash.hpp"

namespace kvgate::index {

using prefix::BlockHash;
using WorkerSlot = std::uint16_t;  // 0..kMaxWorkers-1
inline constexpr std::size_t kWorkersPerWord = 64;
inline constexpr std::size_t kMaxWords = 64;
inline constexpr std::size_t kMaxWorkers = kWorkersPerWord * kMaxWords;  // 4,096 per model

enum class Tier : std::uint8_t { gpu, offloaded };

// Indexed by worker slot, sized to the index's width at lookup time (a
// multiple of 64); a slot beyond it holds nothing. A caller that keeps one
// match per thread and passes it back in looks up without allocating.
struct PrefixMatch {
  // Leading blocks of the request each worker holds (on any tier).
  std::vector<std::uint32_t> blocks;
  // Of those, how many it holds on the GPU tier.
  std::vector<std::uint32_t> gpu_blocks;

  [[nodiscard]] std::uint32_t held(WorkerSlot worker) const { return worker < blocks.size() ? blocks[worker] : 0; }
  [[nodiscard]] std::uint32_t held_on_gpu(WorkerSlot worker) const {
    return worker < gpu_blocks.size() ? gpu_blocks[worker] : 0;
  }

  // limit_to_local_attention's working memory (kept with the match so that
  // a thread's lookups stay allocation-free).
  std::vector<WorkerSlot> scanning;
  std::vector<std::uint32_t> runs;
};

class PrefixIndex {
 public:
  // `max_entries` caps (block, worker) pairs.
  explicit PrefixIndex(std::uint64_t max_entries);
  ~PrefixIndex();
  PrefixIndex(const PrefixIndex&) = delete;
  PrefixIndex& operator=(const PrefixIndex&) = delete;

  // --- Writer thread only. ---
  // Records that `worker` holds these blocks; `now` is the last-touch time
  // (the caller's unit, e.g. seconds). Returns the (block, worker) pairs
  // evicted to stay under the cap.
  std::uint64_t insert(WorkerSlot worker, std::span<const BlockHash> blocks, Tier tier, std::uint32_t now);
  void remove(WorkerSlot worker, std::span<const BlockHash> blocks, Tier tier);
  void drop_worker(WorkerSlot worker);
  // Any thread (a reload); applies from the writer's next insert.
  void set_max_entries(std::uint64_t max_entries) { max_entries_.store(max_entries, std::memory_order_relaxed); }
  [[nodiscard]] std::uint64_t max_entries() const { return max_entries_.load(std::memory_order_relaxed); }
  // Last-touch time of a block (0 when absent).
  [[nodiscard]] std::uint32_t touched(BlockHash block) const;

  // --- Any thread. ---
  void longest_prefix(std::span<const BlockHash> blocks, PrefixMatch& match) const;
  [[nodiscard]] PrefixMatch longest_prefix(std::span<const BlockHash> blocks) const {
    PrefixMatch match;
    longest_prefix(blocks, match);
    return match;
  }
  // A hybrid model (prefix/attention.hpp): caps every worker's run in
  // `match` at `reusable_blocks` and cuts it to the engine's hit, given the
  // local group's copies of `blocks` (stored under prefix::local_group_key).
  // One probe per block serves every worker; a sliding window is scanned
  // from the highest run down and stops once every worker has its window.
  void limit_to_local_attention(std::span<const BlockHash> blocks, const prefix::LocalAttention& attention,
                                std::uint32_t block_size, std::uint32_t reusable_blocks, PrefixMatch& match) const;
  [[nodiscard]] bool holds(WorkerSlot worker, BlockHash block) const;
  // (block, worker) pairs, blocks with at least one holder, pairs of a worker.
  [[nodiscard]] std::uint64_t entries() const { return entries_.load(std::memory_order_relaxed); }
  [[nodiscard]] std::uint64_t blocks() const { return live_blocks_.load(std::memory_order_relaxed); }
  [[nodiscard]] std::uint64_t entries_of(WorkerSlot worker) const {
    return per_worker_[worker].load(std::memory_order_relaxed);
  }
  [[nodiscard]] std::uint64_t capacity_slots() const;
  // 64-bit words per tier mask (grows with the highest slot inserted).
  [[nodiscard]] std::uint32_t mask_words() const;

 private:
  struct Table;
  class ReadGuard;
  static constexpr std::uint32_t kNone = UINT32_MAX;

  // The lookup over one table; FixedWords is its mask width when known at
  // compile time (1), else 0.
  template <std::uint32_t FixedWords>
  static void walk(const Table& table, std::span<const BlockHash> blocks, PrefixMatch& match);
  std::uint32_t find_or_claim(BlockHash key);
  void widen_for(WorkerSlot worker);
  [[nodiscard]] bool live(std::uint32_t slot) const;
  void set_word(std::uint32_t slot, std::uint32_t word, std::uint64_t gpu, std::uint64_t offloaded);
  void unlink(std::uint32_t slot);
  void push_newest(std::uint32_t slot);
  void retire(std::uint32_t slot);
  std::uint64_t evict_over_cap();
  void rebuild(std::uint64_t capacity, std::uint32_t words);

  // Writer-owned: every table ever published (the last is current). Retired
  // tables keep only their header (a few dozen bytes) so that a reader that
  // loaded an old pointer can still touch its counter; their arrays are freed.
  std::vector<std::unique_ptr<Table>> tables_;
  Table* table_ = nullptr;                        // the writer's view: tables_.back()
  std::atomic<const Table*> published_{nullptr};  // the readers' view
  std::atomic<std::uint64_t> max_entries_;
  std::atomic<std::uint64_t> entries_{0};
  std::atomic<std::uint64_t> live_blocks_{0};
  std::array<std::atomic<std::uint64_t>, kMaxWorkers> per_worker_{};
  std::uint32_t newest_ = kNone;
  std::uint32_t oldest_ = kNone;
};

}  // namespace kvgate::index
