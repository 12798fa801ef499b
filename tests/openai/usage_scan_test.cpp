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

TEST(UsageScanner, ReadsLlamaCppsCacheHitFromItsTimings) {
  UsageScanner scanner;
  scanner.feed(R"(data: {"choices":[],"usage":{"completion_tokens":3,"prompt_tokens":90,"total_tokens":93},)"
               R"("timings":{"cache_n":64,"prompt_n":26,"prompt_ms":4.1}})"
               "\n\n");
  scanner.finish();
  EXPECT_EQ(scanner.usage().cached_tokens, 64u);
  EXPECT_EQ(scanner.usage().prompt_tokens, 90u);
}

TEST(UsageScanner, LlamaCppsTimingsWinOverItsUsageInEitherOrder) {
  for (const std::string_view text :
       {R"({"usage":{"completion_tokens":5,"prompt_tokens_details":{"cached_tokens":2}},)"
        R"("timings":{"cache_n":3,"predicted_n":7}})",
        R"({"timings":{"cache_n":3,"predicted_n":7},)"
        R"("usage":{"completion_tokens":5,"prompt_tokens_details":{"cached_tokens":2}}})"}) {
    UsageScanner scanner;
    scanner.feed(text);
    scanner.finish();
    EXPECT_EQ(scanner.usage().cached_tokens, 3u) << text;
    EXPECT_EQ(scanner.usage().completion_tokens, 7u) << text;
  }
}

TEST(UsageScanner, ALlamaCppStreamWithoutUsageStillGivesThePromptFromItsTimings) {
  // No usage was asked for: the finish chunk's timings carry it all.
  UsageScanner scanner;
  scanner.feed(R"(data: {"choices":[{"finish_reason":"length","index":0,"delta":{}}],"object":"chat.completion.chunk",)"
               R"("timings":{"cache_n":436,"prompt_n":62,"prompt_ms":17.2,"predicted_n":16,"predicted_ms":96.8}})"
               "\n\ndata: [DONE]\n\n");
  scanner.finish();
  EXPECT_EQ(scanner.usage().cached_tokens, 436u);
  EXPECT_EQ(scanner.usage().prompt_tokens, 498u);
  EXPECT_EQ(scanner.usage().completion_tokens, 16u);
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

// The usage chunk as each engine sends it: vLLM and SGLang put only the
// envelope and usage there (dropped); llama.cpp adds its timings (cache_n),
// which the client must still get, without the usage it did not ask for.
TEST(UsageEventStripper, KeepsWhatAnEngineAddedToTheUsageChunk) {
  const std::string vllm =
      R"(data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","choices":[],)"
      R"("usage":{"prompt_tokens":9,"total_tokens":12,"completion_tokens":3,"prompt_tokens_details":{"cached_tokens":0}}})"
      "\n\n";
  const std::string sglang =
      R"(data: {"id":"a1","object":"chat.completion.chunk","created":1,"model":"m","choices":[],)"
      R"("usage":{"prompt_tokens":9,"total_tokens":12,"completion_tokens":3,"prompt_tokens_details":{"cached_tokens":0}}})"
      "\n\n";
  const std::string llamacpp =
      R"(data: {"choices":[],"created":1,"id":"chatcmpl-x","model":"m","system_fingerprint":"b1-abc",)"
      R"("object":"chat.completion.chunk","usage":{"completion_tokens":3,"prompt_tokens":9,"total_tokens":12},)"
      R"("timings":{"cache_n":8,"prompt_n":1,"prompt_ms":1.5,"predicted_n":3}})"
      "\r\n\r\n";
  for (const auto* dropped : {&vllm, &sglang}) {
    UsageEventStripper stripper;
    std::string out;
    stripper.feed(*dropped + "data: [DONE]\n\n", out);
    stripper.finish(out);
    EXPECT_EQ(out, "data: [DONE]\n\n");
  }
  UsageEventStripper stripper;
  std::string out;
  stripper.feed(llamacpp + "data: [DONE]\r\n\r\n", out);
  stripper.finish(out);
  EXPECT_EQ(out,
            R"(data: {"choices":[],"created":1,"id":"chatcmpl-x","model":"m","system_fingerprint":"b1-abc",)"
            R"("object":"chat.completion.chunk","timings":{"cache_n":8,"prompt_n":1,"prompt_ms":1.5,"predicted_n":3}})"
            "\r\n\r\ndata: [DONE]\r\n\r\n");
  // Not the JSON object expected: passed on as it is.
  UsageEventStripper odd;
  std::string kept;
  odd.feed("data: {\"choices\":[],\"usage\":{\"x\":1} trailing\n\n", kept);
  EXPECT_EQ(kept, "data: {\"choices\":[],\"usage\":{\"x\":1} trailing\n\n");
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
