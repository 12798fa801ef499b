#pragma once
// One event's fields as the SAX decoder meets them, in whichever order and
// form they arrive (positional arrays, or maps with the tag anywhere); turned
// into an Event once the event's container closes.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "kvgate/kv_events/decoder.hpp"

namespace kvgate::kv_events {

// One block's entry of vLLM's extra_keys.
struct ExtraKeys {
  bool present = false;  // not nil and not an empty list
  bool is_list = false;
  std::vector<std::optional<std::string>> keys;  // nullopt: a key that is not a string
};

struct EventDraft {
  enum class Kind : std::uint8_t { unknown, stored, removed, cleared };

  Kind kind = Kind::unknown;
  std::vector<EngineHash> hashes;
  std::vector<std::uint32_t> tokens;
  std::optional<EngineHash> parent;
  std::uint64_t block_size = 0;  // 0: absent or unusable
  std::optional<std::int64_t> lora_id;
  std::optional<std::string> medium;
  std::optional<std::string> lora_name;
  std::optional<std::string> cache_salt;     // the map form's field
  std::optional<std::string> metadata_salt;  // SGLang's array era: a metadata map's entry
  std::uint32_t metadata_position = 0;       // element position of that map (0: none)
  std::uint32_t elements = 0;                // elements of the event array (array form)
  std::vector<ExtraKeys> extra;
  std::optional<std::uint32_t> group_idx;
  std::optional<std::string> spec_kind;
  std::optional<std::uint32_t> sliding_window;
  bool bad_group = false;  // a group index or window that is not a natural number
  bool saw_hashes = false;
  bool saw_tokens = false;
  bool bad_hashes = false;
  bool bad_tokens = false;
  bool bad_parent = false;

  void reset() { *this = EventDraft{}; }
  // Appends the event to the batch, or counts it as unknown or malformed.
  void finish(EventBatch& batch);
};

EventDraft::Kind event_kind(std::string_view tag);

}  // namespace kvgate::kv_events
