#include "kvgate/kv_events/decoder.hpp"

#include <xxhash.h>

#include <nlohmann/json.hpp>

namespace kvgate::kv_events {
namespace {

using nlohmann::json;

// Field positions of the array form, after the tag (vLLM declaration order).
enum StoredField { kHashes = 1, kParent, kTokens, kBlockSize, kLoraId, kMedium, kLoraName, kExtraKeys };

std::optional<EngineHash> engine_hash(const json& value) {
  if (value.is_number_unsigned()) {
    return value.get<std::uint64_t>();
  }
  if (value.is_number_integer()) {
    return static_cast<std::uint64_t>(value.get<std::int64_t>());
  }
  if (value.is_binary()) {
    const auto& bytes = value.get_binary();
    return XXH3_64bits(bytes.data(), bytes.size());
  }
  return std::nullopt;
}

bool read_hashes(const json& value, std::vector<EngineHash>& out) {
  if (!value.is_array()) {
    return false;
  }
  out.reserve(value.size());
  for (const auto& item : value) {
    auto hash = engine_hash(item);
    if (!hash) {
      return false;
    }
    out.push_back(*hash);
  }
  return true;
}

bool read_tokens(const json& value, std::vector<std::uint32_t>& out) {
  if (!value.is_array()) {
    return false;
  }
  out.reserve(value.size());
  for (const auto& item : value) {
    if (!item.is_number_unsigned() || item.get<std::uint64_t>() > UINT32_MAX) {
      return false;
    }
    out.push_back(item.get<std::uint32_t>());
  }
  return true;
}

// A uniform view of one event's fields, whichever form it came in.
class EventFields {
 public:
  explicit EventFields(const json& event) : event_(event) {}
  [[nodiscard]] const json* get(const char* name, std::size_t position) const {
    if (event_.is_object()) {
      auto found = event_.find(name);
      return found == event_.end() ? nullptr : &*found;
    }
    return position < event_.size() ? &event_[position] : nullptr;
  }
  [[nodiscard]] std::string tag() const {
    const json* tag = event_.is_object() ? get("type", 0) : (event_.empty() ? nullptr : &event_[0]);
    return tag != nullptr && tag->is_string() ? tag->get<std::string>() : std::string();
  }
  [[nodiscard]] bool is_array() const { return event_.is_array(); }
  [[nodiscard]] std::size_t size() const { return event_.size(); }
  [[nodiscard]] const json& raw() const { return event_; }

 private:
  const json& event_;
};

std::optional<std::string> optional_string(const json* value) {
  return value != nullptr && value->is_string() ? std::optional(value->get<std::string>()) : std::nullopt;
}

void read_salt(const EventFields& fields, BlockStored& stored) {
  stored.cache_salt = optional_string(fields.get("cache_salt", 1000));
  // SGLang's array era: a trailing metadata map may carry the salt.
  if (!stored.cache_salt && fields.is_array() && fields.size() > 1 && fields.raw().back().is_object()) {
    stored.cache_salt = optional_string(&fields.raw().back()["cache_salt"]);
  }
}

// vLLM's extra_keys: one entry per block, nil or a tuple of extra hash
// inputs (LoRA name, multimodal hashes, and cache_salt on a request's first
// block; vllm/v1/core/kv_cache_utils.py generate_block_hash_extra_keys). A
// salt on the root block is understood; anything else makes the blocks'
// identity depend on inputs the request path cannot see.
void read_extra_keys(const json& extra, BlockStored& stored) {
  for (std::size_t position = 0; position < extra.size(); ++position) {
    const auto& keys = extra[position];
    if (keys.is_null() || (keys.is_array() && keys.empty())) {
      continue;
    }
    stored.has_extra_keys = true;
    std::vector<std::string> strings;
    bool only_strings = keys.is_array();
    for (const auto& key : keys.is_array() ? keys : json::array()) {
      if (!key.is_string()) {
        only_strings = false;
        break;
      }
      if (!stored.lora_name || key.get_ref<const std::string&>() != *stored.lora_name) {
        strings.push_back(key.get<std::string>());
      }
    }
    const bool root_block = position == 0 && !stored.parent_block_hash;
    if (root_block && only_strings && strings.size() <= 1) {
      if (strings.size() == 1 && !stored.cache_salt) {
        stored.cache_salt = strings.front();
      }
      continue;
    }
    stored.unreproducible_extra_keys = true;
  }
}

std::optional<BlockStored> read_stored(const EventFields& fields) {
  BlockStored stored;
  const auto* hashes = fields.get("block_hashes", kHashes);
  const auto* tokens = fields.get("token_ids", kTokens);
  const auto* block_size = fields.get("block_size", kBlockSize);
  if (hashes == nullptr || tokens == nullptr || block_size == nullptr || !read_hashes(*hashes, stored.block_hashes) ||
      !read_tokens(*tokens, stored.token_ids) || !block_size->is_number_unsigned() ||
      block_size->get<std::uint64_t>() == 0 || block_size->get<std::uint64_t>() > 1u << 20) {
    return std::nullopt;
  }
  stored.block_size = block_size->get<std::uint32_t>();
  if (stored.token_ids.size() != stored.block_hashes.size() * stored.block_size) {
    return std::nullopt;  // vLLM sends exactly one full block of tokens per hash
  }
  if (const auto* parent = fields.get("parent_block_hash", kParent); parent != nullptr && !parent->is_null()) {
    stored.parent_block_hash = engine_hash(*parent);
    if (!stored.parent_block_hash) {
      return std::nullopt;
    }
  }
  if (const auto* lora = fields.get("lora_id", kLoraId); lora != nullptr && lora->is_number_integer()) {
    stored.lora_id = lora->get<std::int64_t>();
  }
  if (auto medium = optional_string(fields.get("medium", kMedium))) {
    stored.medium = *medium;
  }
  stored.lora_name = optional_string(fields.get("lora_name", kLoraName));
  read_salt(fields, stored);
  if (const auto* extra = fields.get("extra_keys", kExtraKeys); extra != nullptr && extra->is_array()) {
    read_extra_keys(*extra, stored);
  }
  return stored;
}

std::optional<BlockRemoved> read_removed(const EventFields& fields) {
  BlockRemoved removed;
  const auto* hashes = fields.get("block_hashes", 1);
  if (hashes == nullptr || !read_hashes(*hashes, removed.block_hashes)) {
    return std::nullopt;
  }
  if (auto medium = optional_string(fields.get("medium", 2))) {
    removed.medium = *medium;
  }
  return removed;
}

void read_event(const json& event, EventBatch& batch) {
  if (!event.is_array() && !event.is_object()) {
    ++batch.malformed_events;
    return;
  }
  EventFields fields(event);
  auto tag = fields.tag();
  if (tag == "BlockStored") {
    auto stored = read_stored(fields);
    if (stored) {
      batch.events.emplace_back(std::move(*stored));
    } else {
      ++batch.malformed_events;
    }
  } else if (tag == "BlockRemoved") {
    auto removed = read_removed(fields);
    if (removed) {
      batch.events.emplace_back(std::move(*removed));
    } else {
      ++batch.malformed_events;
    }
  } else if (tag == "AllBlocksCleared") {
    batch.events.emplace_back(AllBlocksCleared{});
  } else {
    ++batch.unknown_events;
  }
}

}  // namespace

Result<EventBatch, DecodeError> decode_batch(std::string_view payload) {
  auto root = json::from_msgpack(payload, /*strict=*/true, /*allow_exceptions=*/false);
  if (root.is_discarded()) {
    return unexpected(DecodeError{"not a MessagePack value (truncated or garbage payload)"});
  }
  const json* timestamp = nullptr;
  const json* events = nullptr;
  const json* rank = nullptr;
  if (root.is_array() && root.size() >= 2) {
    timestamp = &root[0];
    events = &root[1];
    rank = root.size() >= 3 ? &root[2] : nullptr;
  } else if (root.is_object()) {
    timestamp = root.contains("ts") ? &root["ts"] : nullptr;
    events = root.contains("events") ? &root["events"] : nullptr;
    for (const char* key : {"data_parallel_rank", "attn_dp_rank"}) {
      if (root.contains(key)) {
        rank = &root[key];
      }
    }
  }
  if (timestamp == nullptr || !timestamp->is_number() || events == nullptr || !events->is_array()) {
    return unexpected(DecodeError{"not an event batch: expected [ts, events, rank] or {ts, events}"});
  }
  EventBatch batch;
  batch.timestamp = timestamp->get<double>();
  if (rank != nullptr && rank->is_number_integer()) {
    batch.data_parallel_rank = rank->get<std::int64_t>();
  }
  batch.events.reserve(events->size());
  for (const auto& event : *events) {
    read_event(event, batch);
  }
  return batch;
}

}  // namespace kvgate::kv_events
