#include "kv_event_encoder.hpp"

#include <functional>
#include <string>

#include "msgpack_writer.hpp"

namespace kvgate::sim {
namespace {

std::string_view medium_name(Medium medium) {
  return medium == Medium::gpu ? "GPU" : "CPU";
}

template <class Values, class Write>
void write_array(MsgpackWriter& writer, const Values& values, Write write) {
  writer.array_header(static_cast<std::uint32_t>(values.size()));
  for (const auto& value : values) {
    write(value);
  }
}

// vLLM sends the low 64 bits of its digest unsigned; SGLang a signed int64.
void write_hash(MsgpackWriter& writer, BlockHash hash, EventFormat format) {
  if (format == EventFormat::sglang) {
    writer.signed_integer(static_cast<std::int64_t>(hash));
  } else {
    writer.unsigned_integer(hash);
  }
}

void write_hashes(MsgpackWriter& writer, const std::vector<BlockHash>& hashes, EventFormat format) {
  write_array(writer, hashes, [&](BlockHash hash) { write_hash(writer, hash, format); });
}

void write_parent(MsgpackWriter& writer, const std::optional<BlockHash>& parent, EventFormat format) {
  if (parent) {
    write_hash(writer, *parent, format);
  } else {
    writer.nil();
  }
}

// vLLM's extra_keys: one entry per block, the salt in the first block's
// tuple, nil for the others.
void write_extra_keys(MsgpackWriter& writer, const BlockStored& event) {
  writer.array_header(static_cast<std::uint32_t>(event.block_hashes.size()));
  for (std::size_t block = 0; block < event.block_hashes.size(); ++block) {
    if (block == 0) {
      writer.array_header(1);
      writer.string(event.root_cache_salt);
    } else {
      writer.nil();
    }
  }
}

void write_stored(MsgpackWriter& writer, const BlockStored& event, EventFormat format) {
  auto tokens = [&] { write_array(writer, event.token_ids, [&](TokenId id) { writer.unsigned_integer(id); }); };
  const bool salted = !event.root_cache_salt.empty();
  const bool lora = !event.lora_name.empty();
  if (format != EventFormat::map) {
    // vLLM <= 0.23 adds lora_name and extra_keys (the salt) when salted or
    // for an adapter; SGLang a trailing metadata map, and for an adapter
    // only its numeric lora_id (no name).
    const bool sglang = format == EventFormat::sglang;
    const bool tail = !sglang && (salted || lora);  // lora_name and extra_keys
    writer.array_header(tail ? 9 : salted ? 8 : 7);
    writer.string("BlockStored");
    write_hashes(writer, event.block_hashes, format);
    write_parent(writer, event.parent_block_hash, format);
    tokens();
    writer.unsigned_integer(event.block_size);
    if (sglang && lora) {
      writer.unsigned_integer(1 + std::hash<std::string>{}(event.lora_name) % 1'000'000);  // lora_id
    } else {
      writer.nil();  // lora_id
    }
    writer.string(medium_name(event.medium));
    if (salted && sglang) {
      writer.map_header(1);
      writer.string("cache_salt");
      writer.string(event.root_cache_salt);
    } else if (tail) {
      if (lora) {
        writer.string(event.lora_name);
      } else {
        writer.nil();  // lora_name
      }
      if (salted) {
        write_extra_keys(writer, event);
      } else {
        writer.nil();  // extra_keys
      }
    }
    return;
  }
  const bool grouped = event.group_idx.has_value();
  const bool windowed = event.sliding_window.has_value();
  writer.map_header((salted ? 8 : 7) + (lora ? 1 : 0) + (grouped ? 2 : 0) + (windowed ? 1 : 0));
  writer.string("type");
  writer.string("BlockStored");
  writer.string("block_hashes");
  write_hashes(writer, event.block_hashes, format);
  writer.string("parent_block_hash");
  write_parent(writer, event.parent_block_hash, format);
  writer.string("token_ids");
  tokens();
  writer.string("block_size");
  writer.unsigned_integer(event.block_size);
  writer.string("lora_id");
  writer.nil();
  writer.string("medium");
  writer.string(medium_name(event.medium));
  if (salted) {
    writer.string("extra_keys");
    write_extra_keys(writer, event);
  }
  if (lora) {
    writer.string("lora_name");
    writer.string(event.lora_name);
  }
  if (grouped) {
    writer.string("group_idx");
    writer.unsigned_integer(*event.group_idx);
    writer.string("kv_cache_spec_kind");
    writer.string(event.spec_kind);
  }
  if (windowed) {
    writer.string("kv_cache_spec_sliding_window");
    writer.unsigned_integer(*event.sliding_window);
  }
}

void write_removed(MsgpackWriter& writer, const BlockRemoved& event, EventFormat format) {
  if (format != EventFormat::map) {
    writer.array_header(3);
    writer.string("BlockRemoved");
    write_hashes(writer, event.block_hashes, format);
    writer.string(medium_name(event.medium));
    return;
  }
  writer.map_header(event.group_idx ? 4 : 3);
  writer.string("type");
  writer.string("BlockRemoved");
  writer.string("block_hashes");
  write_hashes(writer, event.block_hashes, format);
  writer.string("medium");
  writer.string(medium_name(event.medium));
  if (event.group_idx) {
    writer.string("group_idx");
    writer.unsigned_integer(*event.group_idx);
  }
}

void write_cleared(MsgpackWriter& writer, EventFormat format) {
  if (format != EventFormat::map) {
    writer.array_header(1);
    writer.string("AllBlocksCleared");
    return;
  }
  writer.map_header(1);
  writer.string("type");
  writer.string("AllBlocksCleared");
}

}  // namespace

std::string encode_event_batch(std::span<const CacheEvent> events, double timestamp_seconds,
                               std::optional<std::int64_t> data_parallel_rank, EventFormat format) {
  MsgpackWriter writer;
  writer.array_header(data_parallel_rank ? 3 : 2);
  writer.float64(timestamp_seconds);
  writer.array_header(static_cast<std::uint32_t>(events.size()));
  for (const auto& event : events) {
    if (const auto* stored = std::get_if<BlockStored>(&event)) {
      write_stored(writer, *stored, format);
    } else if (const auto* removed = std::get_if<BlockRemoved>(&event)) {
      write_removed(writer, *removed, format);
    } else {
      write_cleared(writer, format);
    }
  }
  if (data_parallel_rank) {
    writer.signed_integer(*data_parallel_rank);
  }
  return writer.take();
}

}  // namespace kvgate::sim
