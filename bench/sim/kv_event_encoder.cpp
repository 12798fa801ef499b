#include "kv_event_encoder.hpp"

#include "msgpack_writer.hpp"

namespace kvgate::sim {
namespace {

constexpr std::string_view kMedium = "GPU";

template <class Values, class Write>
void write_array(MsgpackWriter& writer, const Values& values, Write write) {
  writer.array_header(static_cast<std::uint32_t>(values.size()));
  for (const auto& value : values) {
    write(value);
  }
}

void write_hashes(MsgpackWriter& writer, const std::vector<BlockHash>& hashes) {
  write_array(writer, hashes, [&](BlockHash hash) { writer.unsigned_integer(hash); });
}

void write_parent(MsgpackWriter& writer, const std::optional<BlockHash>& parent) {
  if (parent) {
    writer.unsigned_integer(*parent);
  } else {
    writer.nil();
  }
}

void write_stored(MsgpackWriter& writer, const BlockStored& event, EventFormat format) {
  auto tokens = [&] { write_array(writer, event.token_ids, [&](TokenId id) { writer.unsigned_integer(id); }); };
  if (format == EventFormat::array) {
    writer.array_header(7);
    writer.string("BlockStored");
    write_hashes(writer, event.block_hashes);
    write_parent(writer, event.parent_block_hash);
    tokens();
    writer.unsigned_integer(event.block_size);
    writer.nil();  // lora_id
    writer.string(kMedium);
    return;
  }
  writer.map_header(7);
  writer.string("type");
  writer.string("BlockStored");
  writer.string("block_hashes");
  write_hashes(writer, event.block_hashes);
  writer.string("parent_block_hash");
  write_parent(writer, event.parent_block_hash);
  writer.string("token_ids");
  tokens();
  writer.string("block_size");
  writer.unsigned_integer(event.block_size);
  writer.string("lora_id");
  writer.nil();
  writer.string("medium");
  writer.string(kMedium);
}

void write_removed(MsgpackWriter& writer, const BlockRemoved& event, EventFormat format) {
  if (format == EventFormat::array) {
    writer.array_header(3);
    writer.string("BlockRemoved");
    write_hashes(writer, event.block_hashes);
    writer.string(kMedium);
    return;
  }
  writer.map_header(3);
  writer.string("type");
  writer.string("BlockRemoved");
  writer.string("block_hashes");
  write_hashes(writer, event.block_hashes);
  writer.string("medium");
  writer.string(kMedium);
}

void write_cleared(MsgpackWriter& writer, EventFormat format) {
  if (format == EventFormat::array) {
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
