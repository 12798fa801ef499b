#pragma once
// Decoding of the engines' KV-event batches (MessagePack; formats in
// ../shared/docs/engines.md): vLLM <= 0.23 and SGLang's array events, newer
// vLLM's and SGLang's map events, batches as array or map, block hashes as
// uint64, int64 or raw bytes. Pure and total: any byte string gives either a
// batch or an error value, never an exception. Unknown event types and
// unknown fields are skipped (engines add them across versions); a known
// event with fields of the wrong shape is skipped and counted as malformed.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "kvgate/core/result.hpp"

namespace kvgate::kv_events {

// An engine's own block hash, normalised to 64 bits: integers as their
// 64-bit pattern (int64 and uint64 forms of the same value agree), raw bytes
// as XXH3-64 of the bytes. Only used as a key to find what a later
// BlockRemoved refers to; never compared with kvgate's hashes.
using EngineHash = std::uint64_t;

struct BlockStored {
  std::vector<EngineHash> block_hashes;
  std::optional<EngineHash> parent_block_hash;
  std::vector<std::uint32_t> token_ids;
  std::uint32_t block_size = 0;
  std::optional<std::int64_t> lora_id;
  std::string medium = "GPU";
  std::optional<std::string> lora_name;
  std::optional<std::string> cache_salt;  // SGLang's field or metadata entry
  bool has_extra_keys = false;            // vLLM's per-block extra hash inputs were present
  // Extra inputs other than a root block's salt (multimodal hashes, ...):
  // the blocks cannot be reproduced from token ids alone.
  bool unreproducible_extra_keys = false;
  // vLLM's hybrid KV cache: the cache group the blocks belong to, its kind
  // ("full_attention", "sliding_window", ...) and window. Absent: one group
  // of full attention (older vLLM, SGLang).
  std::optional<std::uint32_t> group_idx;
  std::optional<std::string> spec_kind;
  std::optional<std::uint32_t> sliding_window;
};

struct BlockRemoved {
  std::vector<EngineHash> block_hashes;
  std::string medium = "GPU";
  std::optional<std::uint32_t> group_idx;
};

struct AllBlocksCleared {};

using Event = std::variant<BlockStored, BlockRemoved, AllBlocksCleared>;

struct EventBatch {
  double timestamp = 0;
  std::vector<Event> events;
  std::optional<std::int64_t> data_parallel_rank;
  std::uint32_t unknown_events = 0;    // types this decoder does not know (skipped)
  std::uint32_t malformed_events = 0;  // known types with unusable fields (skipped)
};

struct DecodeError {
  std::string message;
};

Result<EventBatch, DecodeError> decode_batch(std::string_view payload);

}  // namespace kvgate::kv_events
