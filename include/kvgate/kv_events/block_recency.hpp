#pragma once
// One worker's GPU blocks by when a request last used them: the order its
// engine evicts in (vLLM's free-block queue and SGLang's radix tree are
// LRU), summarised by idle age for cache_aware's eviction term
// (policy/eviction.hpp). A block is used when the engine stores it (a KV
// event), when the engine stores a block that continues it (the request
// that computed the new block held its whole chain: how a gateway learns
// of the hits other gateways' requests had) and when the gateway routes a
// request whose prompt contains it.
//
// Per block the 100 ms tick of its last use, per tick how many blocks were
// last used then. Writer thread only (WorkerCaches); pure, time comes in.
#include <cstdint>

#include <absl/container/btree_map.h>
#include <absl/container/flat_hash_map.h>

#include "kvgate/policy/eviction.hpp"
#include "kvgate/prefix/block_hash.hpp"

namespace kvgate::kv_events {

class BlockRecency {
 public:
  static constexpr std::uint64_t kTickMs = 100;

  void touch(prefix::BlockHash block, std::uint64_t now_ms);
  void forget(prefix::BlockHash block);
  void clear();
  [[nodiscard]] std::uint64_t size() const { return tick_of_.size(); }
  // Blocks per idle-age bucket as of now_ms. Walks one entry per distinct
  // tick still holding blocks (at most the cache's residency / 100 ms).
  [[nodiscard]] policy::AgeHistogram ages(std::uint64_t now_ms) const;

 private:
  absl::flat_hash_map<prefix::BlockHash, std::uint32_t> tick_of_;
  absl::btree_map<std::uint32_t, std::uint32_t> blocks_per_tick_;
};

}  // namespace kvgate::kv_events
