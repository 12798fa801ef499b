#include "event_draft.hpp"

namespace kvgate::kv_events {
namespace {

// A block size no engine uses; beyond it the token array would be absurd.
constexpr std::uint64_t kMaxBlockSize = 1u << 20;

// vLLM's extra_keys: one entry per block, nil or a tuple of extra hash
// inputs (LoRA name, multimodal hashes, and cache_salt on a request's first
// block; vllm/v1/core/kv_cache_utils.py generate_block_hash_extra_keys). A
// salt on the root block is understood; anything else makes the blocks'
// identity depend on inputs the request path cannot see.
void read_extra_keys(const std::vector<ExtraKeys>& extra, BlockStored& stored) {
  for (std::size_t position = 0; position < extra.size(); ++position) {
    const auto& entry = extra[position];
    if (!entry.present) {
      continue;
    }
    stored.has_extra_keys = true;
    std::vector<const std::string*> strings;
    bool only_strings = entry.is_list;
    for (const auto& key : entry.keys) {
      if (!key) {
        only_strings = false;
        break;
      }
      if (!stored.lora_name || *key != *stored.lora_name) {
        strings.push_back(&*key);
      }
    }
    const bool root_block = position == 0 && !stored.parent_block_hash;
    if (root_block && only_strings && strings.size() <= 1) {
      if (strings.size() == 1 && !stored.cache_salt) {
        stored.cache_salt = *strings.front();
      }
      continue;
    }
    stored.unreproducible_extra_keys = true;
  }
}

std::optional<BlockStored> stored_event(EventDraft& draft) {
  const bool usable = draft.saw_hashes && !draft.bad_hashes && draft.saw_tokens && !draft.bad_tokens &&
                      !draft.bad_parent && !draft.bad_group && draft.block_size > 0 &&
                      draft.block_size <= kMaxBlockSize &&
                      // vLLM sends exactly one full block of tokens per hash
                      draft.tokens.size() == draft.hashes.size() * draft.block_size;
  if (!usable) {
    return std::nullopt;
  }
  BlockStored stored;
  stored.block_hashes = std::move(draft.hashes);
  stored.token_ids = std::move(draft.tokens);
  stored.block_size = static_cast<std::uint32_t>(draft.block_size);
  stored.parent_block_hash = draft.parent;
  stored.lora_id = draft.lora_id;
  if (draft.medium) {
    stored.medium = std::move(*draft.medium);
  }
  stored.lora_name = std::move(draft.lora_name);
  stored.cache_salt = std::move(draft.cache_salt);
  // SGLang's array era: the salt rides in a trailing metadata map.
  if (!stored.cache_salt && draft.metadata_position != 0 && draft.metadata_position + 1 == draft.elements) {
    stored.cache_salt = std::move(draft.metadata_salt);
  }
  read_extra_keys(draft.extra, stored);
  stored.group_idx = draft.group_idx;
  stored.spec_kind = std::move(draft.spec_kind);
  stored.sliding_window = draft.sliding_window;
  return stored;
}

}  // namespace

EventDraft::Kind event_kind(std::string_view tag) {
  if (tag == "BlockStored") {
    return EventDraft::Kind::stored;
  }
  if (tag == "BlockRemoved") {
    return EventDraft::Kind::removed;
  }
  return tag == "AllBlocksCleared" ? EventDraft::Kind::cleared : EventDraft::Kind::unknown;
}

void EventDraft::finish(EventBatch& batch) {
  switch (kind) {
    case Kind::stored:
      if (auto stored = stored_event(*this)) {
        batch.events.emplace_back(std::move(*stored));
      } else {
        ++batch.malformed_events;
      }
      return;
    case Kind::removed:
      if (saw_hashes && !bad_hashes && !bad_group) {
        BlockRemoved removed;
        removed.block_hashes = std::move(hashes);
        removed.group_idx = group_idx;
        if (medium) {
          removed.medium = std::move(*medium);
        }
        batch.events.emplace_back(std::move(removed));
      } else {
        ++batch.malformed_events;
      }
      return;
    case Kind::cleared:
      batch.events.emplace_back(AllBlocksCleared{});
      return;
    case Kind::unknown:
      ++batch.unknown_events;
      return;
  }
}

}  // namespace kvgate::kv_events
