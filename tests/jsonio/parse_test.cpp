#include "kvgate/jsonio/parse.hpp"

#include <gtest/gtest.h>

#include <string>

namespace kvgate::jsonio {
namespace {

// A chat body of about `bytes` bytes: one message whose content is that long.
std::string chat_body(std::size_t bytes) {
  std::string content(bytes, 'a');
  for (std::size_t at = 0; at < content.size(); at += 7) {
    content[at] = ' ';
  }
  return R"({"model":"m","messages":[{"role":"user","content":")" + content + R"("}],"stream":false})";
}

TEST(JsonParse, ABodyOverTheKeptSizeParsesAndLeavesTheThreadsParserSmall) {
  const auto small = chat_body(1000);
  ASSERT_TRUE(parse_ordered(small));
  const auto kept_before = kept_parser_capacity();
  EXPECT_GE(kept_before, small.size());
  EXPECT_LE(kept_before, kKeptParserBytes);

  const auto large = chat_body(kKeptParserBytes + (1 << 20));
  const auto document = parse_ordered(large);
  ASSERT_TRUE(document);
  const auto& content = (*document)["messages"][0]["content"].get_ref<const std::string&>();
  EXPECT_EQ(content.size(), kKeptParserBytes + (1 << 20));
  EXPECT_EQ(content, large.substr(large.find("\"content\":\"") + 11, content.size()));
  EXPECT_EQ((*document)["stream"], false);
  // Read by a parser of its own: the thread's parser did not grow to it.
  EXPECT_EQ(kept_parser_capacity(), kept_before);

  // A body within the size still uses (and may grow) the kept parser.
  const auto medium = chat_body(kKeptParserBytes / 2);
  ASSERT_TRUE(parse(medium));
  EXPECT_GE(kept_parser_capacity(), medium.size());
  EXPECT_LE(kept_parser_capacity(), kKeptParserBytes + 4096);
}

TEST(JsonParse, WhatSimdjsonRefusesNlohmannDecidesOnBothPaths) {
  // An integer beyond 64 bits: simdjson refuses it, nlohmann reads a float.
  const std::string big_integer = R"({"n": 123456789012345678901234567890})";
  const auto document = parse(big_integer);
  ASSERT_TRUE(document);
  EXPECT_TRUE((*document)["n"].is_number_float());
  EXPECT_FALSE(parse("{not json"));
  auto large_broken = chat_body(kKeptParserBytes + 1);
  large_broken.pop_back();
  EXPECT_FALSE(parse(large_broken));
}

}  // namespace
}  // namespace kvgate::jsonio
