#pragma once
// The attention layout of a model as its KV cache sees it: full attention
// alone, or full attention beside one kind of local attention (sliding
// window, chunked local) whose layers keep their own cache group. The
// engine's hit on such a model needs both groups (vLLM's
// HybridKVCacheCoordinator.find_longest_cache_hit, vllm/v1/core/
// kv_cache_coordinator.py: full attention first, then the local group within
// that length; the shorter wins), so kvgate indexes the local group's blocks
// under their own keys and applies the same rule.
#include <cstdint>
#include <string>

#include "kvgate/prefix/block_hash.hpp"

namespace kvgate::prefix {

enum class AttentionKind : std::uint8_t { full, sliding_window, chunked_local };

struct LocalAttention {
  AttentionKind kind = AttentionKind::full;
  std::uint32_t tokens = 0;  // the window (sliding_window) or the chunk (chunked_local), in tokens
  // Cache groups of the local kind: vLLM splits a model's layers into
  // groups of equal size, so Gemma 3's five sliding layers per global one
  // make five, each taking a block per position from the shared pool.
  std::uint32_t groups = 1;

  [[nodiscard]] bool hybrid() const { return kind != AttentionKind::full && tokens > 0; }
  bool operator==(const LocalAttention&) const = default;
};

// "full", "sliding_window 1024", "chunked_local 8192", "sliding_window 1024 x 5 groups".
std::string to_string(const LocalAttention& attention);

// The index key of a block's copy in the local group: the same chained hash
// through a fixed bijection (splitmix64's finaliser), so it meets a
// full-attention key only by chance and keys that arrive structured (small
// integers, multiples of one constant) still spread over the table.
inline BlockHash local_group_key(BlockHash block) {
  auto key = block ^ 0x6c6f63616c4b5631ULL;
  key = (key ^ (key >> 30)) * 0xbf58476d1ce4e5b9ULL;
  key = (key ^ (key >> 27)) * 0x94d049bb133111ebULL;
  return key ^ (key >> 31);
}

// How many leading blocks of a prompt the engine serves from its cache when
// the full-attention group holds the first `full_blocks` (already capped at
// what the engine may reuse) and `local_held(i)` says whether the local
// group holds block i. The reference form of the rule; PrefixIndex applies
// it to every worker at once.
// - sliding window (vLLM SlidingWindowManager.find_longest_cache_hit, in
//   vllm/v1/core/single_type_kv_cache_manager.py): scanning from the hit
//   point down, the first run of ceil((window - 1) / block_size) held
//   blocks ends the hit; without one, the run that reaches block 0 does
//   (blocks before the window are never read).
// - chunked local (ChunkedLocalAttentionManager.find_longest_cache_hit):
//   blocks before the last chunk boundary at or below the hit point are not
//   needed; from that boundary the held run counts.
template <class LocalHeld>
std::uint32_t hybrid_hit_blocks(const LocalAttention& attention, std::uint32_t block_size, std::uint32_t full_blocks,
                                LocalHeld local_held) {
  if (!attention.hybrid() || full_blocks == 0) {
    return full_blocks;
  }
  if (attention.kind == AttentionKind::sliding_window) {
    const std::uint32_t needed = (attention.tokens - 1 + block_size - 1) / block_size;
    std::uint32_t run = 0;
    for (std::uint32_t block = full_blocks; block-- > 0;) {
      if (!local_held(block)) {
        run = 0;
        continue;
      }
      if (++run >= needed) {
        return block + run;
      }
    }
    return run;
  }
  const std::uint64_t tokens = std::uint64_t{full_blocks} * block_size;
  const auto start = static_cast<std::uint32_t>(tokens / attention.tokens * attention.tokens / block_size);
  std::uint32_t end = start;
  while (end < full_blocks && local_held(end)) {
    ++end;
  }
  return end;
}

}  // namespace kvgate::prefix
