#include "kvgate/openai/usage_scan.hpp"

#include <gtest/gtest.h>

namespace kvgate::openai {
namespace {

constexpr std::string_view kJson =
    R"({"id":"c1","choices":[{"message":{"content":"say \"cached_tokens\":99 please"}}],)"
    R"("usage":{"prompt_tokens":1234,"completion_tokens":16,"total_tokens":1250,)"
    R"("prompt_tokens_details":{"cached_tokens":1216}}})";

TEST(UsageScanner, FindsTheNumbersWhateverTheSplit) {
  for (std::size_t piece = 1; piece <= kJson.size(); ++piece) {
    UsageScanner scanner;
    for (std::size_t at = 0; at < kJson.size(); at += piece) {
      scanner.feed(kJson.substr(at, piece));
    }
    scanner.finish();
    ASSERT_EQ(scanner.usage().cached_tokens, 1216u) << "pieces of " << piece;
    EXPECT_EQ(scanner.usage().prompt_tokens, 1234u);
    EXPECT_EQ(scanner.usage().completion_tokens, 16u);
  }
}

TEST(UsageScanner, KeysInsideStringsAndAbsentUsageAreNotNumbers) {
  UsageScanner scanner;
  scanner.feed(R"({"content":"\"cached_tokens\":5","usage":null})");
  scanner.finish();
  EXPECT_FALSE(scanner.usage().cached_tokens);
  EXPECT_FALSE(scanner.usage().prompt_tokens);
}

TEST(UsageScanner, TheLastReportWins) {
  UsageScanner scanner;
  scanner.feed("data: {\"usage\":{\"completion_tokens\":1}}\n\n");
  scanner.feed("data: {\"usage\":{\"completion_tokens\":2}}\n\ndata: [DONE]\n\n");
  scanner.finish();
  EXPECT_EQ(scanner.usage().completion_tokens, 2u);
}

TEST(UsageEventStripper, DropsOnlyTheUsageEventAndKeepsEventsWhole) {
  const std::string stream =
      "data: {\"choices\":[{\"delta\":{\"content\":\"a\"}}]}\n\n"
      "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":3,\"prompt_tokens_details\":{\"cached_tokens\":0}}}\n\n"
      "data: [DONE]\n\n";
  const std::string expected = "data: {\"choices\":[{\"delta\":{\"content\":\"a\"}}]}\n\ndata: [DONE]\n\n";
  for (std::size_t piece = 1; piece <= stream.size(); ++piece) {
    UsageEventStripper stripper;
    std::string out;
    for (std::size_t at = 0; at < stream.size(); at += piece) {
      stripper.feed(std::string_view(stream).substr(at, piece), out);
    }
    stripper.finish(out);
    ASSERT_EQ(out, expected) << "pieces of " << piece;
  }
}

TEST(UsageEventStripper, HandsOverAnUnfinishedEventAtTheEnd) {
  UsageEventStripper stripper;
  std::string out;
  stripper.feed("data: {\"choices\":[{}]}\r\n\r\ndata: {\"err", out);
  EXPECT_EQ(out, "data: {\"choices\":[{}]}\r\n\r\n");
  stripper.finish(out);
  EXPECT_EQ(out, "data: {\"choices\":[{}]}\r\n\r\ndata: {\"err");
}

}  // namespace
}  // namespace kvgate::openai
