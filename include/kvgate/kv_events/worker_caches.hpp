#pragma once
// The writer side of one model's prefix index: turns the engines' KV events
// and the gateway's own routing decisions into index updates, and keeps what
// it needs to undo them later.
//
// Per worker it keeps
// - engine blocks: engine hash -> (kvgate hash, copies), per tier. vLLM may
//   hold the same hash in several physical blocks and sends one
//   BlockStored / BlockRemoved per physical block, hence the copy count;
// - confirmed blocks: kvgate hash -> engine blocks that map to it, per tier;
// - assumed blocks: kvgate hashes inserted at routing time (approximate mode,
//   or speculative until events arrive), bounded by the worker's KV capacity
//   in blocks and expiring after a TTL.
// A worker's bit for a block is set in the index exactly while the block is
// confirmed on that tier or (GPU tier) assumed. A BlockStored that confirms
// an assumed block ends the assumption: from then on only the events say
// whether the engine still holds it.
//
// Pure and single-threaded (the index writer thread calls it); time comes
// in as milliseconds on any monotonic clock.
#include <algorithm>
#include <array>
#include <atomic>
#include <bit>
#include <cstdint>
#include <list>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include <absl/container/flat_hash_map.h>

#include "kvgate/index/prefix_index.hpp"
#include "kvgate/kv_events/block_recency.hpp"
#include "kvgate/kv_events/decoder.hpp"
#include "kvgate/kv_events/sequence_slots.hpp"
#include "kvgate/prefix/attention.hpp"

namespace kvgate::kv_events {

using index::BlockHash;
using index::WorkerSlot;

struct ApplyStats {
  std::uint64_t stored_blocks = 0;
  std::uint64_t removed_blocks = 0;
  std::uint64_t gpu_evicted_blocks = 0;  // GPU blocks the engine freed (removed, or cleared)
  std::uint64_t cleared = 0;
  // Stored blocks that cannot be matched by requests (unknown parent, other
  // block size, multimodal extra keys): tracked for removal, not indexed.
  std::uint64_t unindexable_blocks = 0;
  std::uint64_t unknown_removals = 0;  // BlockRemoved for a hash never stored
  // Blocks of a cache group kvgate cannot match (a kind it does not model,
  // such as mamba, or a second window): counted, never applied to another
  // group. The first such group, to be named in a log line.
  std::uint64_t unknown_group_blocks = 0;
  std::optional<std::uint32_t> unknown_group;
  std::string unknown_group_kind;
  std::uint64_t evicted_entries = 0;  // index cap evictions caused
  bool over_limit = false;            // the worker went over max_engine_blocks and was reset
};

// A model's attention layout as the index uses it: what the configuration
// says (models[].attention) and what the engines' KV events report
// (kv_cache_spec_kind and window per cache group). What the events report
// wins. Set by the control thread (configured) and the index writer
// (reported); read by any thread (the router, for every decision).
class AttentionLayout {
 public:
  void configure(const prefix::LocalAttention& attention) {
    configured_.store(pack(attention), std::memory_order_relaxed);
  }
  void report(const prefix::LocalAttention& attention) { reported_.store(pack(attention), std::memory_order_relaxed); }
  [[nodiscard]] prefix::LocalAttention configured() const {
    return unpack(configured_.load(std::memory_order_relaxed)).value_or(prefix::LocalAttention{});
  }
  // nullopt: no event has named a cache group yet.
  [[nodiscard]] std::optional<prefix::LocalAttention> reported() const {
    return unpack(reported_.load(std::memory_order_relaxed));
  }
  [[nodiscard]] prefix::LocalAttention effective() const { return reported().value_or(configured()); }

 private:
  static constexpr std::uint64_t kPresent = std::uint64_t{1} << 63;
  // Bits 0-31 the tokens, 32-39 the kind, 40-47 the groups (at most 255).
  static std::uint64_t pack(const prefix::LocalAttention& attention) {
    return kPresent | (std::uint64_t{std::min<std::uint32_t>(attention.groups, 255)} << 40) |
           (std::uint64_t{static_cast<std::uint8_t>(attention.kind)} << 32) | attention.tokens;
  }
  static std::optional<prefix::LocalAttention> unpack(std::uint64_t packed) {
    if ((packed & kPresent) == 0) {
      return std::nullopt;
    }
    return prefix::LocalAttention{static_cast<prefix::AttentionKind>((packed >> 32) & 0xff),
                                  static_cast<std::uint32_t>(packed),
                                  static_cast<std::uint32_t>((packed >> 40) & 0xff)};
  }
  std::atomic<std::uint64_t> configured_{0};
  std::atomic<std::uint64_t> reported_{0};
};

struct CacheLimits {
  std::uint32_t block_size = 16;  // the model's configured block size
  // A fence against a broken publisher: a real engine never holds more.
  std::uint64_t max_engine_blocks = 4'000'000;
};

class WorkerCaches {
 public:
  WorkerCaches(index::PrefixIndex& index, std::string model, CacheLimits limits, AttentionLayout& attention)
      : index_(index), model_(std::move(model)), limits_(limits), attention_(attention) {}

  ApplyStats apply(WorkerSlot worker, const EventBatch& batch, std::uint64_t now_ms);

  // Routing-time insert for the GPU tier.
  struct AssumeResult {
    // Entries evicted: by the index's cap, or as the worker's full cache
    // would evict them (its KV capacity reached).
    std::uint64_t evicted_entries = 0;
    std::uint64_t new_blocks = 0;  // blocks the worker was not known to hold: the engine will store them
  };
  // `ticket` names the routed request (its decision sequence number); a
  // block's assumption belongs to the request that created it.
  AssumeResult assume(WorkerSlot worker, std::span<const BlockHash> blocks, std::uint64_t now_ms, std::uint64_t ttl_ms,
                      std::uint64_t capacity_blocks, std::uint64_t ticket = 0);
  // The request `ticket` was not run (the engine answered an error before
  // its first token, or never answered): the assumptions it created go,
  // those other requests created or the events confirmed stay. Returns how
  // many went.
  std::uint64_t withdraw(WorkerSlot worker, std::span<const BlockHash> blocks, std::uint64_t ticket,
                         std::uint64_t now_ms = 0);
  // A worker that keeps whole prompts in slots (config::CacheModel::
  // sequences): its routing-time inserts follow SequenceSlots instead of an
  // LRU of blocks, and need the end of each request (finish). A request
  // busy for `max_busy_ms` is taken as ended. 0 slots: blocks again. A
  // change starts the worker afresh.
  // `ram_blocks`: llama-server's host-RAM prompt cache, in blocks (0: off).
  void set_sequence_slots(WorkerSlot worker, std::uint32_t slots, double min_similarity, std::uint64_t max_busy_ms,
                          std::uint64_t ram_blocks = 0);
  // The request `ticket` routed to a sequences worker ended (a no-op for
  // other workers).
  void finish(WorkerSlot worker, std::uint64_t ticket, std::uint64_t now_ms,
              std::optional<std::uint32_t> reported_blocks = std::nullopt);
  [[nodiscard]] const SequenceSlots* sequence_slots(WorkerSlot worker) const;
  // Drops assumptions whose TTL has passed.
  void expire(std::uint64_t now_ms);

  // What the events told (after a gap that replay could not close): the
  // worker's confirmed blocks go; assumptions stay.
  void forget_confirmed(WorkerSlot worker);
  // Everything (engine restart, cache reset, worker removed).
  void drop_worker(WorkerSlot worker);
  // The worker's engine restarted, seen by its counters (no events): its
  // cache is empty. A sequences worker keeps the requests it runs and
  // waits for (SequenceSlots::engine_restarted: they are the new
  // process's), so their ends still credit what they leave in the slots;
  // any other worker is dropped.
  void engine_restarted(WorkerSlot worker, std::uint64_t now_ms);

  [[nodiscard]] std::uint64_t engine_blocks(WorkerSlot worker) const;
  [[nodiscard]] std::uint64_t assumed_blocks(WorkerSlot worker) const;
  // Blocks the index credits the worker on the GPU tier (confirmed or
  // assumed), and the same blocks by idle age (BlockRecency).
  [[nodiscard]] std::uint64_t gpu_blocks(WorkerSlot worker) const;
  [[nodiscard]] policy::AgeHistogram gpu_block_ages(WorkerSlot worker, std::uint64_t now_ms) const;

 private:
  struct EngineBlock {
    BlockHash kvgate_hash = 0;  // the chained hash (a local group's block is indexed under local_group_key of it)
    EngineHash parent = 0;      // meaningful when has_parent
    std::uint32_t copies = 0;
    // The recency tick (BlockRecency::kTickMs) when this block's chain was
    // last refreshed up to the root (touch_chain), or inherited from the
    // parent it was stored under.
    std::uint32_t chain_tick = 0;
    bool indexed = false;
    bool has_parent = false;
    bool local = false;  // a block of the local-attention group
    [[nodiscard]] BlockHash index_key() const { return local ? prefix::local_group_key(kvgate_hash) : kvgate_hash; }
  };
  // What a cache group's blocks are to the index. Engine hashes are the
  // same in every group (vLLM hashes a request's blocks once), so a local
  // group's are kept under local_engine_key of the hash and the group.
  // Several groups of one kind (Gemma 3's sliding layers split into groups
  // of equal size) share the block's index key, which counts once every
  // one of them holds the block: vLLM looks a block up in all of them.
  enum class GroupUse : std::uint8_t { unseen, full, local, unusable };
  static constexpr std::size_t kMaxGroups = 64;
  static EngineHash local_engine_key(EngineHash hash, std::uint32_t group) {
    return hash ^ (0x4c6f63616c477270ULL * (group + 1));
  }
  // How many local groups a block must be in to count (at least one).
  [[nodiscard]] std::uint32_t local_groups() const { return std::max(1, std::popcount(local_groups_)); }
  void note_local(std::uint32_t group, GroupUse use);
  GroupUse group_use(std::optional<std::uint32_t> group, const std::optional<std::string>& kind,
                     std::optional<std::uint32_t> window);
  // A chain refreshed less than this many ticks ago is not walked again:
  // an engine stores a block per 16 tokens of every running request, and
  // the eviction term's age buckets start at 100 ms and double, so a chain
  // up to a second stale loses nothing (the walk is bounded by one per
  // running request per second).
  static constexpr std::uint32_t kChainRefreshTicks = 10;
  struct Assumed {
    std::uint64_t expires_ms = 0;
    std::list<BlockHash>::iterator position;
    std::uint64_t ticket = 0;  // the request that created it
    std::uint32_t weight = 1;  // pool blocks it stands for (a local block: one per local group)
  };
  struct Worker {
    absl::flat_hash_map<EngineHash, EngineBlock> engine[2];      // by tier
    absl::flat_hash_map<BlockHash, std::uint32_t> confirmed[2];  // by tier
    absl::flat_hash_map<BlockHash, Assumed> assumed;
    std::list<BlockHash> assumed_order;        // least recently assumed first
    std::uint64_t assumed_weight = 0;          // pool blocks the assumptions stand for
    BlockRecency recency;                      // GPU blocks, confirmed or assumed
    std::unique_ptr<SequenceSlots> sequences;  // set for a sequences worker
  };
  struct SlotConfig {
    std::uint32_t slots = 0;  // 0: the blocks model
    double min_similarity = 0;
    std::uint64_t max_busy_ms = 0;
    std::uint64_t ram_blocks = 0;
  };
  // The local group's copies of a routed prompt (approximate mode).
  void assume_local(WorkerSlot slot, Worker& state, std::span<const BlockHash> blocks, std::uint32_t hit,
                    std::uint64_t now_ms, std::uint64_t ttl_ms, std::uint64_t ticket, AssumeResult& result);
  void apply_slot_changes(WorkerSlot slot, Worker& state, std::uint64_t now_ms, AssumeResult* result = nullptr);
  // The index credits a block on `tier` exactly while `holds` says so; a
  // block may have gone both ways within one change.
  template <class Holds>
  void apply_tier_changes(WorkerSlot slot, Worker& state, index::Tier tier, std::span<const BlockHash> credit,
                          std::span<const BlockHash> uncredit, Holds holds, std::uint64_t now_ms, AssumeResult* result);

  Worker& worker(WorkerSlot slot);
  void store(WorkerSlot slot, const BlockStored& event, std::uint64_t now_ms, ApplyStats& stats);
  void remove(WorkerSlot slot, const BlockRemoved& event, ApplyStats& stats);
  void unassume(WorkerSlot slot, Worker& state, BlockHash block);
  static void forget_assumption(Worker& state, BlockHash block);
  // Assumes `key` for the request `ticket` (refreshing it when assumed).
  static void assume_key(Worker& state, BlockHash key, std::uint32_t weight, std::uint64_t expires_ms,
                         std::uint64_t ticket);
  const EngineBlock* find_parent(const Worker& state, EngineHash parent, index::Tier tier, bool local,
                                 std::uint32_t group) const;
  // Returns the chain's refresh tick after the walk (now's, or an earlier
  // one within kChainRefreshTicks).
  static std::uint32_t touch_chain(Worker& state, EngineHash parent, std::uint64_t now_ms);

  index::PrefixIndex& index_;
  std::string model_;
  CacheLimits limits_;
  AttentionLayout& attention_;
  std::array<GroupUse, kMaxGroups> groups_{};                        // by the events' group_idx, as their kinds said
  std::uint64_t local_groups_ = 0;                                   // bit per group index used as the local group
  std::array<std::unique_ptr<Worker>, index::kMaxWorkers> workers_;  // by slot; null: nothing known
  std::array<SlotConfig, index::kMaxWorkers> slot_configs_{};        // by slot; outlives drop_worker
  SequenceSlots::Changes slot_changes_;
  std::vector<BlockHash> scratch_;
  std::vector<BlockHash> local_scratch_;
};

index::Tier tier_of(const std::string& medium);

}  // namespace kvgate::kv_events
