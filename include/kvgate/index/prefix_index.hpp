#pragma once
// Which workers hold which blocks: block hash -> bitmask of workers (one
// mask for GPU copies, one for offloaded copies), with an LRU over blocks
// and a cap on (block, worker) entries.
//
// - Lookup walks a request's block hashes from the start, AND-ing masks, and
//   stops as soon as no worker still matches: one hash-map probe per block
//   that some worker holds, nothing per worker.
// - Workers are slots 0..63 of one index (one index per model; a model with
//   more than 64 workers needs several indexes, or a wider mask).
// - The cap counts (block, worker) pairs; when an insert goes over it, the
//   least recently inserted blocks are dropped whole, and the caller is told
//   how many pairs went (a metric).
// Pure and single-threaded: the shell decides how readers and the writer
// share it (see src/index/README.md).
#include <array>
#include <cstdint>
#include <span>
#include <unordered_map>
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
  explicit PrefixIndex(std::uint64_t max_entries) : max_entries_(max_entries) {}

  // Records that `worker` holds these blocks; `now` orders eviction (any
  // monotonic unit). Returns the (block, worker) pairs evicted to stay under
  // the cap.
  std::uint64_t insert(WorkerSlot worker, std::span<const BlockHash> blocks, Tier tier, std::uint64_t now);
  void remove(WorkerSlot worker, std::span<const BlockHash> blocks, Tier tier);
  void drop_worker(WorkerSlot worker);

  [[nodiscard]] PrefixMatch longest_prefix(std::span<const BlockHash> blocks) const;
  [[nodiscard]] bool holds(WorkerSlot worker, BlockHash block) const;

  [[nodiscard]] std::uint64_t entries() const { return entries_; }  // (block, worker) pairs
  [[nodiscard]] std::size_t blocks() const { return slots_.size() - free_.size(); }
  [[nodiscard]] std::uint64_t entries_of(WorkerSlot worker) const { return per_worker_[worker]; }

 private:
  static constexpr std::uint32_t kNone = UINT32_MAX;
  struct Block {
    BlockHash hash = 0;
    std::uint64_t gpu = 0;        // workers with a GPU copy
    std::uint64_t offloaded = 0;  // workers with another tier's copy
    std::uint64_t touched = 0;
    std::uint32_t older = kNone;  // LRU links (towards the tail = oldest)
    std::uint32_t newer = kNone;
  };

  std::uint32_t find_or_add(BlockHash hash);
  void set_bits(Block& block, std::uint64_t gpu, std::uint64_t offloaded);
  void release(std::uint32_t slot);
  void unlink(std::uint32_t slot);
  void push_newest(std::uint32_t slot);
  std::uint64_t evict_over_cap();

  std::uint64_t max_entries_;
  std::uint64_t entries_ = 0;
  std::array<std::uint64_t, kMaxWorkers> per_worker_{};
  std::unordered_map<BlockHash, std::uint32_t> by_hash_;
  std::vector<Block> slots_;
  std::vector<std::uint32_t> free_;
  std::uint32_t newest_ = kNone;
  std::uint32_t oldest_ = kNone;
};

}  // namespace kvgate::index
