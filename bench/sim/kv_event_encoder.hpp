#pragma once
// vLLM's KV-event batches as MessagePack (vllm/distributed/kv_events.py,
// msgspec structs with omit_defaults):
// - batch: array [ts (float64), events, data_parallel_rank] — the rank is
//   omitted when it is nil (its default), as msgspec does;
// - array form (vLLM <= 0.23): each event an array, tag first, then the
//   fields in declaration order;
// - map form (newer vLLM): each event a map with "type" and its fields;
//   fields at their default (lora_name, extra_keys, ...) are omitted.
// - SGLang's array era (python/sglang/srt/disaggregation/kv_events.py): the
//   array form with hashes as signed 64-bit integers, no lora_name or
//   extra_keys, and a salted request's salt in a trailing metadata map
//   {"cache_salt": ...}.
// BlockStored carries block_hashes, parent_block_hash, token_ids,
// block_size, lora_id (nil), medium ("GPU"); BlockRemoved block_hashes,
// medium; AllBlocksCleared nothing.
#include <optional>
#include <span>
#include <string>

#include "block_pool.hpp"

namespace kvgate::sim {

enum class EventFormat { map, array, sglang };

std::string encode_event_batch(std::span<const CacheEvent> events, double timestamp_seconds,
                               std::optional<std::int64_t> data_parallel_rank, EventFormat format);

}  // namespace kvgate::sim
