#include "kvgate/kv_events/decoder.hpp"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "kv_event_encoder.hpp"

namespace kvgate::kv_events {
namespace {

using nlohmann::json;

std::string msgpack(const json& value) {
  auto bytes = json::to_msgpack(value);
  return std::string(bytes.begin(), bytes.end());
}

TEST(KvEventDecoder, ReadsTheSimulatorsMapArrayAndSglangFormsAlike) {
  std::vector<sim::CacheEvent> events{sim::BlockStored{{0x8000000000000001ULL, 5}, 99, {1, 2, 3, 4}, 2},
                                      sim::BlockRemoved{{5}}, sim::AllBlocksCleared{}};
  for (auto format : {sim::EventFormat::map, sim::EventFormat::array, sim::EventFormat::sglang}) {
    auto batch = decode_batch(sim::encode_event_batch(events, 12.5, 0, format));
    ASSERT_TRUE(batch) << batch.error().message;
    EXPECT_DOUBLE_EQ(batch->timestamp, 12.5);
    EXPECT_EQ(batch->data_parallel_rank, 0);
    ASSERT_EQ(batch->events.size(), 3u);
    const auto& stored = std::get<BlockStored>(batch->events[0]);
    EXPECT_EQ(stored.block_hashes, (std::vector<EngineHash>{0x8000000000000001ULL, 5}));
    EXPECT_EQ(stored.parent_block_hash, 99u);
    EXPECT_EQ(stored.token_ids, (std::vector<std::uint32_t>{1, 2, 3, 4}));
    EXPECT_EQ(stored.block_size, 2u);
    EXPECT_EQ(stored.medium, "GPU");
    EXPECT_EQ(std::get<BlockRemoved>(batch->events[1]).block_hashes, std::vector<EngineHash>{5});
    EXPECT_TRUE(std::holds_alternative<AllBlocksCleared>(batch->events[2]));
  }
}

// vLLM's hybrid KV cache names each block's group (map form and the array
// form's positions 9-11; BlockRemoved's position 3); a group index that is
// not a natural number makes the event malformed, nil means not reported.
TEST(KvEventDecoder, CacheGroupFieldsAreReadInBothForms) {
  json map_stored = {{"type", "BlockStored"},
                     {"block_hashes", {7}},
                     {"parent_block_hash", nullptr},
                     {"token_ids", {1, 2}},
                     {"block_size", 2},
                     {"group_idx", 1},
                     {"kv_cache_spec_kind", "sliding_window"},
                     {"kv_cache_spec_sliding_window", 128}};
  json array_stored =
      json::array({"BlockStored", {7}, nullptr, {1, 2}, 2, nullptr, "GPU", nullptr, nullptr, 1, "sliding_window", 128});
  json array_removed = json::array({"BlockRemoved", {7}, "GPU", 1});
  json map_removed = {{"type", "BlockRemoved"}, {"block_hashes", {7}}, {"group_idx", 1}};
  for (const auto& [stored_event, removed_event] :
       {std::pair{map_stored, map_removed}, std::pair{array_stored, array_removed}}) {
    auto batch = decode_batch(msgpack(json::array({1.0, json::array({stored_event, removed_event})})));
    ASSERT_TRUE(batch);
    ASSERT_EQ(batch->events.size(), 2u) << stored_event.dump();
    const auto& stored = std::get<BlockStored>(batch->events[0]);
    EXPECT_EQ(stored.group_idx, 1u);
    EXPECT_EQ(stored.spec_kind, "sliding_window");
    EXPECT_EQ(stored.sliding_window, 128u);
    EXPECT_EQ(std::get<BlockRemoved>(batch->events[1]).group_idx, 1u);
  }
  auto full = map_stored;
  full["kv_cache_spec_kind"] = "full_attention";
  full["kv_cache_spec_sliding_window"] = nullptr;
  auto batch = decode_batch(msgpack(json::array({1.0, json::array({full})})));
  ASSERT_TRUE(batch);
  EXPECT_FALSE(std::get<BlockStored>(batch->events[0]).sliding_window.has_value());
  auto negative = map_stored;
  negative["group_idx"] = -1;
  auto listed = map_removed;
  listed["group_idx"] = json::array({1});
  batch = decode_batch(msgpack(json::array({1.0, json::array({negative, listed})})));
  ASSERT_TRUE(batch);
  EXPECT_TRUE(batch->events.empty());
  EXPECT_EQ(batch->malformed_events, 2u);
}

TEST(KvEventDecoder, SignedAndUnsignedFormsOfAHashAgree) {
  auto batch =
      decode_batch(msgpack(json::array({1.0, json::array({json::array({"BlockRemoved", json::array({-2})})})})));
  ASSERT_TRUE(batch);
  EXPECT_EQ(std::get<BlockRemoved>(batch->events[0]).block_hashes[0], 0xFFFFFFFFFFFFFFFEULL);
  EXPECT_FALSE(batch->data_parallel_rank);  // the oldest two-element batches
}

TEST(KvEventDecoder, ByteHashesAreNormalisedConsistently) {
  auto bytes = json::binary({0xde, 0xad, 0xbe, 0xef, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12});
  json stored = {{"type", "BlockStored"},
                 {"block_hashes", json::array({bytes})},
                 {"parent_block_hash", nullptr},
                 {"token_ids", json::array({7})},
                 {"block_size", 1}};
  json removed = {{"type", "BlockRemoved"}, {"block_hashes", json::array({bytes})}};
  auto batch = decode_batch(msgpack(json::array({1.0, json::array({stored, removed}), 0})));
  ASSERT_TRUE(batch);
  EXPECT_EQ(std::get<BlockStored>(batch->events[0]).block_hashes[0],
            std::get<BlockRemoved>(batch->events[1]).block_hashes[0]);
}

TEST(KvEventDecoder, MapBatchesAndSglangFieldsAreAccepted) {
  json stored = json::array({"BlockStored", json::array({1}), nullptr, json::array({5, 6}), 2, nullptr, "GPU",
                             json{{"cache_salt", "tenant-a"}}});
  auto batch = decode_batch(msgpack(json{{"ts", 3.0}, {"events", json::array({stored})}, {"attn_dp_rank", 1}}));
  ASSERT_TRUE(batch) << batch.error().message;
  EXPECT_EQ(batch->data_parallel_rank, 1);
  EXPECT_EQ(std::get<BlockStored>(batch->events[0]).cache_salt, "tenant-a");
  json map_form = {{"type", "BlockStored"}, {"block_hashes", json::array({1})}, {"token_ids", json::array({5})},
                   {"block_size", 1},       {"cache_salt", "tenant-b"},         {"medium", "CPU"},
                   {"future_field", 42}};
  auto map_batch = decode_batch(msgpack(json::array({1.0, json::array({map_form})})));
  ASSERT_TRUE(map_batch);
  const auto& event = std::get<BlockStored>(map_batch->events[0]);
  EXPECT_EQ(event.cache_salt, "tenant-b");
  EXPECT_EQ(event.medium, "CPU");
  EXPECT_FALSE(event.parent_block_hash);  // omitted = default (none)
}

TEST(KvEventDecoder, UnknownTypesAreSkippedMalformedOnesCounted) {
  json events = json::array({json::array({"BlockMoved", 1, 2}),
                             json{{"type", "BlockStored"},
                                  {"block_hashes", json::array({1})},
                                  {"token_ids", json::array({1, 2, 3})},
                                  {"block_size", 2}},  // 3 tokens, 1 block of 2
                             json::array({"BlockRemoved", "not a list"}), 17, json::array({"AllBlocksCleared"})});
  auto batch = decode_batch(msgpack(json::array({1.0, events})));
  ASSERT_TRUE(batch);
  EXPECT_EQ(batch->unknown_events, 1u);
  EXPECT_EQ(batch->malformed_events, 3u);
  ASSERT_EQ(batch->events.size(), 1u);
  EXPECT_TRUE(std::holds_alternative<AllBlocksCleared>(batch->events[0]));
}

TEST(KvEventDecoder, FieldsAreFoundWhateverTheirOrderNestingAndIntegerWidth) {
  // An unknown field nests maps and lists that reuse known names; they must
  // not leak into the event. (nlohmann writes map keys sorted, so "type"
  // comes after the fields it gives a meaning to.)
  json noise = {{"block_hashes", json::array({9, 9})}, {"deep", json::array({json{{"token_ids", json::array({1})}}})}};
  json event = {{"type", "BlockStored"},
                {"a_future_field", noise},
                {"block_hashes", json::array({1})},
                {"token_ids", json::array({5, 6})},
                {"block_size", 2}};
  auto batch = decode_batch(msgpack(json::array({1.0, json::array({event})})));
  ASSERT_TRUE(batch) << batch.error().message;
  ASSERT_EQ(batch->events.size(), 1u);
  EXPECT_EQ(std::get<BlockStored>(batch->events[0]).block_hashes, std::vector<EngineHash>{1});
  EXPECT_EQ(std::get<BlockStored>(batch->events[0]).token_ids, (std::vector<std::uint32_t>{5, 6}));

  // Token ids and the block size written as signed integers (int8, int64).
  std::string signed_ids("\x92\xcb\x3f\xf0\0\0\0\0\0\0\x91\x95\xab", 13);  // [1.0, [[<11-byte string>
  signed_ids += "BlockStored";
  signed_ids += std::string("\x91\x01\xc0\x92\xd0\x05\xd3\0\0\0\0\0\0\0\x06\xd0\x02", 17);
  auto widths = decode_batch(signed_ids);
  ASSERT_TRUE(widths) << widths.error().message;
  ASSERT_EQ(widths->events.size(), 1u) << widths->malformed_events;
  EXPECT_EQ(std::get<BlockStored>(widths->events[0]).token_ids, (std::vector<std::uint32_t>{5, 6}));
}

TEST(KvEventDecoder, OnlyATrailingMetadataMapCarriesTheSalt) {
  json not_last = json::array({"BlockStored", json::array({1}), nullptr, json::array({5}), 1, nullptr,
                               json{{"cache_salt", "tenant-a"}}, nullptr});
  auto batch = decode_batch(msgpack(json::array({1.0, json::array({not_last})})));
  ASSERT_TRUE(batch);
  const auto& stored = std::get<BlockStored>(batch->events.at(0));
  EXPECT_FALSE(stored.cache_salt);
  EXPECT_EQ(stored.medium, "GPU");  // a map where the medium belongs is ignored
}

TEST(KvEventDecoder, ALengthPrefixIsOnlyAClaim) {
  // [1.0, <array32 claiming 4 billion events>] and nothing after it.
  const std::string claim("\x92\xcb\x3f\xf0\0\0\0\0\0\0\xdd\xff\xff\xff\xff", 15);
  EXPECT_FALSE(decode_batch(claim));
}

TEST(KvEventDecoder, GarbageAndTruncationAreErrorsNotCrashes) {
  std::vector<sim::CacheEvent> events{sim::BlockStored{{1}, std::nullopt, {1, 2}, 2}};
  auto good = sim::encode_event_batch(events, 1.0, 0, sim::EventFormat::map);
  for (std::size_t cut = 0; cut < good.size(); ++cut) {
    EXPECT_FALSE(decode_batch(std::string_view(good).substr(0, cut))) << "cut at " << cut;
  }
  EXPECT_FALSE(decode_batch("\xc1"));  // a byte MessagePack never uses
  EXPECT_FALSE(decode_batch(msgpack(json("a string"))));
  EXPECT_FALSE(decode_batch(msgpack(json::array({"ts", json::array()}))));
  EXPECT_FALSE(decode_batch(msgpack(json::array({1.0, 5}))));
}

}  // namespace
}  // namespace kvgate::kv_events

namespace kvgate::kv_events {
namespace {

TEST(KvEventDecoderExtraKeys, TheRootBlocksSaltIsReadFromVllmExtraKeys) {
  std::vector<sim::CacheEvent> events{sim::BlockStored{{7, 8}, std::nullopt, {1, 2, 3, 4}, 2, "tenant-a"}};
  for (auto format : {sim::EventFormat::map, sim::EventFormat::array}) {
    auto batch = decode_batch(sim::encode_event_batch(events, 1, std::nullopt, format));
    ASSERT_TRUE(batch) << batch.error().message;
    const auto& stored = std::get<BlockStored>(batch->events.at(0));
    EXPECT_EQ(stored.cache_salt, "tenant-a");
    EXPECT_TRUE(stored.has_extra_keys);
    EXPECT_FALSE(stored.unreproducible_extra_keys);
  }
}

TEST(KvEventDecoderExtraKeys, SglangsSaltComesFromItsTrailingMetadataMap) {
  std::vector<sim::CacheEvent> events{sim::BlockStored{{7, 8}, std::nullopt, {1, 2, 3, 4}, 2, "tenant-a"}};
  auto batch = decode_batch(sim::encode_event_batch(events, 1, std::nullopt, sim::EventFormat::sglang));
  ASSERT_TRUE(batch) << batch.error().message;
  const auto& stored = std::get<BlockStored>(batch->events.at(0));
  EXPECT_EQ(stored.cache_salt, "tenant-a");
  EXPECT_FALSE(stored.has_extra_keys);
  EXPECT_EQ(stored.block_hashes, (std::vector<EngineHash>{7, 8}));
}

TEST(KvEventDecoderExtraKeys, OtherExtraKeysMakeTheBlocksUnreproducible) {
  auto encode = [](const nlohmann::json& extra_keys, const nlohmann::json& parent) {
    nlohmann::json event = {{"type", "BlockStored"},     {"block_hashes", {1, 2}}, {"parent_block_hash", parent},
                            {"token_ids", {1, 2, 3, 4}}, {"block_size", 2},        {"lora_name", "adapter"},
                            {"extra_keys", extra_keys}};
    auto bytes = nlohmann::json::to_msgpack(nlohmann::json::array({1.0, {event}}));
    return decode_batch(std::string(bytes.begin(), bytes.end()));
  };
  // The LoRA name next to the salt is recognised; a multimodal hash is not.
  auto lora_and_salt = encode({{"adapter", "salt"}, nullptr}, nullptr);
  ASSERT_TRUE(lora_and_salt);
  EXPECT_EQ(std::get<BlockStored>(lora_and_salt->events[0]).cache_salt, "salt");
  EXPECT_FALSE(std::get<BlockStored>(lora_and_salt->events[0]).unreproducible_extra_keys);
  auto image = encode({nullptr, {"image-hash", 5}}, nullptr);
  EXPECT_TRUE(std::get<BlockStored>(image->events[0]).unreproducible_extra_keys);
  // A salt-looking key on a block that does not start at the root is no salt.
  auto not_root = encode({{"x"}, nullptr}, 99);
  EXPECT_TRUE(std::get<BlockStored>(not_root->events[0]).unreproducible_extra_keys);
  EXPECT_FALSE(std::get<BlockStored>(not_root->events[0]).cache_salt);
}

}  // namespace
}  // namespace kvgate::kv_events
