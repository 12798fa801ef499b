#include "kv_event_encoder.hpp"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "msgpack_writer.hpp"

namespace kvgate::sim {
namespace {

std::string bytes(std::initializer_list<int> values) {
  std::string out;
  for (int value : values) {
    out.push_back(static_cast<char>(value));
  }
  return out;
}

const BlockHash kHighHash = 0x8000000000000001ULL;  // above 2^63: must stay unsigned

TEST(MsgpackWriter, UsesTheSmallestIntegerForms) {
  MsgpackWriter writer;
  writer.unsigned_integer(5);
  writer.unsigned_integer(200);
  writer.unsigned_integer(70000);
  writer.signed_integer(-3);
  writer.signed_integer(-100);
  EXPECT_EQ(writer.bytes(), bytes({0x05, 0xcc, 0xc8, 0xce, 0x00, 0x01, 0x11, 0x70, 0xfd, 0xd0, 0x9c}));
}

TEST(MsgpackWriter, LengthPrefixesGrowWithTheValue) {
  MsgpackWriter writer;
  writer.string(std::string(40, 'x'));
  writer.array_header(20);
  writer.map_header(2);
  auto out = writer.bytes();
  EXPECT_EQ(out.substr(0, 2), bytes({0xd9, 40}));
  EXPECT_EQ(out.substr(42), bytes({0xdc, 0x00, 20, 0x82}));
}

// Golden bytes of the array form (vLLM <= 0.23), written out by hand from
// the MessagePack spec.
TEST(KvEventEncoder, ArrayFormGoldenBytes) {
  std::vector<CacheEvent> events{BlockStored{{kHighHash}, std::nullopt, {1, 2}, 2}};
  auto encoded = encode_event_batch(events, 1.5, 0, EventFormat::array);
  auto expected = bytes({0x93, 0xcb, 0x3f, 0xf8, 0, 0, 0, 0, 0, 0, 0x91, 0x97, 0xab}) + "BlockStored" +
                  bytes({0x91, 0xcf, 0x80, 0, 0, 0, 0, 0, 0, 0x01, 0xc0, 0x92, 0x01, 0x02, 0x02, 0xc0, 0xa3}) + "GPU" +
                  bytes({0x00});
  EXPECT_EQ(encoded, expected);
}

TEST(KvEventEncoder, RemovedAndClearedArrayFormGoldenBytes) {
  std::vector<CacheEvent> events{BlockRemoved{{7}}, AllBlocksCleared{}};
  auto encoded = encode_event_batch(events, 0.0, std::nullopt, EventFormat::array);
  auto expected = bytes({0x92, 0xcb, 0, 0, 0, 0, 0, 0, 0, 0, 0x92, 0x93, 0xac}) + "BlockRemoved" +
                  bytes({0x91, 0x07, 0xa3}) + "GPU" + bytes({0x91, 0xb0}) + "AllBlocksCleared";
  EXPECT_EQ(encoded, expected);
}

// The map form, read back by an independent decoder (nlohmann's).
TEST(KvEventEncoder, MapFormDecodesToVllmFieldNames) {
  std::vector<CacheEvent> events{BlockStored{{kHighHash, 42}, BlockHash{9}, {1, 2, 3, 4}, 2}, BlockRemoved{{42}},
                                 AllBlocksCleared{}};
  auto encoded = encode_event_batch(events, 1700000000.25, 0, EventFormat::map);
  auto batch = nlohmann::json::from_msgpack(encoded);
  ASSERT_TRUE(batch.is_array());
  ASSERT_EQ(batch.size(), 3u);
  EXPECT_DOUBLE_EQ(batch[0].get<double>(), 1700000000.25);
  EXPECT_EQ(batch[2], 0);
  const auto& stored = batch[1][0];
  EXPECT_EQ(stored["type"], "BlockStored");
  EXPECT_EQ(stored["block_hashes"][0].get<std::uint64_t>(), kHighHash);
  EXPECT_TRUE(stored["block_hashes"][0].is_number_unsigned());
  EXPECT_EQ(stored["parent_block_hash"], 9);
  EXPECT_EQ(stored["token_ids"], nlohmann::json({1, 2, 3, 4}));
  EXPECT_EQ(stored["block_size"], 2);
  EXPECT_TRUE(stored["lora_id"].is_null());
  EXPECT_EQ(stored["medium"], "GPU");
  EXPECT_EQ(batch[1][1]["type"], "BlockRemoved");
  EXPECT_EQ(batch[1][1]["block_hashes"][0], 42);
  EXPECT_EQ(batch[1][2], nlohmann::json({{"type", "AllBlocksCleared"}}));
  // A CPU-tier copy says so.
  std::vector<CacheEvent> offloaded{BlockStored{{42}, std::nullopt, {1, 2}, 2, "", Medium::cpu},
                                    BlockRemoved{{42}, Medium::cpu}};
  auto cpu = nlohmann::json::from_msgpack(encode_event_batch(offloaded, 1.0, std::nullopt, EventFormat::map));
  EXPECT_EQ(cpu[1][0]["medium"], "CPU");
  EXPECT_EQ(cpu[1][1]["medium"], "CPU");
}

TEST(KvEventEncoder, TimestampIsAlwaysFloat64) {
  // msgspec never shrinks floats; nlohmann would write 1.5 as float32.
  auto encoded = encode_event_batch({}, 1.5, std::nullopt, EventFormat::map);
  EXPECT_EQ(static_cast<unsigned char>(encoded[1]), 0xcb);
  EXPECT_EQ(encoded.size(), 1u + 9u + 1u);
}

}  // namespace
}  // namespace kvgate::sim
