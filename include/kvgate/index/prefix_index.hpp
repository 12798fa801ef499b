#pragma once
// Which workers hold which blocks: block hash -> bitmask of workers (one
// mask for GPU copies, one for offloaded copies), with an LRU over blocks
// and a cap on (block, worker) entries.
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
// Workers are slots 0..63 of one index (one index per model).
#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "kvgate/prefix/block_hash.hpp"

namespace kvgate::index {

using prefix::BlockHash;
using WorkerSlot = std::uint8_t;  // 0..63
inline constexpr std::size_t kMaxWorkers = 64;

enum class Tier : std::uint8_t { gpu, offloaded };

struct PrefixMatch {
  // Leading blocks of the request each worker holds (on any tier).
  std::array<std::uint32_t, kMaxWorkers> blocks{};
  // Of those, how many it holds on the GPU tier.
  std::array<std::uint32_t, kMaxWorkers> gpu_blocks{};
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
  [[nodiscard]] PrefixMatch longest_prefix(std::span<const BlockHash> blocks) const;
  [[nodiscard]] bool holds(WorkerSlot worker, BlockHash block) const;
  // (block, worker) pairs, blocks with at least one holder, pairs of a worker.
  [[nodiscard]] std::uint64_t entries() const { return entries_.load(std::memory_order_relaxed); }
  [[nodiscard]] std::uint64_t blocks() const { return live_blocks_.load(std::memory_order_relaxed); }
  [[nodiscard]] std::uint64_t entries_of(WorkerSlot worker) const {
    return per_worker_[worker].load(std::memory_order_relaxed);
  }
  [[nodiscard]] std::uint64_t capacity_slots() const;

 private:
  struct Table;
  class ReadGuard;
  static constexpr std::uint32_t kNone = UINT32_MAX;

  std::uint32_t find_or_claim(BlockHash key);
  void set_bits(std::uint32_t slot, std::uint64_t gpu, std::uint64_t offloaded);
  void unlink(std::uint32_t slot);
  void push_newest(std::uint32_t slot);
  void retire(std::uint32_t slot);
  std::uint64_t evict_over_cap();
  void rebuild(std::uint64_t capacity);

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
