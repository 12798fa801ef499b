#include "kvgate/tokenizer/llmd_sim.hpp"

#include <gtest/gtest.h>

#include <string>

namespace kvgate::tokenizer {
namespace {

// 32-bit FNV-1a, written out here as its definition so the test does not
// share the code under test.
TokenId fnv(const std::string& bytes) {
  std::uint32_t hash = 2166136261u;
  for (unsigned char byte : bytes) {
    hash = (hash ^ byte) * 16777619u;
  }
  return hash;
}

std::vector<TokenId> ids(std::initializer_list<std::string> pieces) {
  std::vector<TokenId> out;
  for (const auto& piece : pieces) {
    out.push_back(fnv(piece));
  }
  return out;
}

// Ids llm-d-inference-sim v0.10.2's POST /tokenize returned for
// "### system: " (its rendering of a system message's start).
TEST(LlmdSimTokens, MatchTheSimulatorsOwnIds) {
  auto tokens = llmd_sim_tokens("### system: ");
  ASSERT_EQ(tokens.size(), 5u);
  EXPECT_EQ(tokens[0], 638357778u);
  EXPECT_EQ(tokens[1], 638357778u);
  EXPECT_EQ(tokens[2], 399020470u);
  EXPECT_EQ(tokens[3], 1226705564u);
  EXPECT_EQ(tokens[4], 2382766391u);
}

TEST(LlmdSimTokens, WordsAndPunctuationCarryTheSpacesAfterThem) {
  EXPECT_EQ(llmd_sim_tokens("Hello, world!\n\tok"), ids({"Hello", ", ", "world", "!\n\t", "ok"}));
  EXPECT_EQ(llmd_sim_tokens("a  b\r\n\fc"), ids({"a  ", "b\r\n\f", "c"}));
  EXPECT_EQ(llmd_sim_tokens("x=[1,2]"), ids({"x", "=", "[", "1", ",", "2", "]"}));
}

// "_" is an alternative of its own before \w+: a match that starts there is
// "_" alone, while inside a word it is part of the word.
TEST(LlmdSimTokens, AnUnderscoreStartsAMatchOfItsOwn) {
  EXPECT_EQ(llmd_sim_tokens("_tmp snake_case"), ids({"_", "tmp ", "snake_case"}));
}

// Bytes no alternative matches (other punctuation, every non-ASCII byte,
// leading spaces) belong to no token, and neither do the spaces after them.
TEST(LlmdSimTokens, UnmatchedBytesAreSkipped) {
  EXPECT_EQ(llmd_sim_tokens("  café | naïve`x"), ids({"caf", "na", "ve", "x"}));
  EXPECT_TRUE(llmd_sim_tokens("").empty());
  EXPECT_TRUE(llmd_sim_tokens(" \n |`").empty());
}

// Appending to a prompt changes at most its last token: a conversation's
// earlier turns keep their ids, and so their blocks.
TEST(LlmdSimTokens, AppendingKeepsThePrefix) {
  auto before = llmd_sim_tokens("### user: which screws?\n");
  auto after = llmd_sim_tokens("### user: which screws?\n### assistant: these\n");
  ASSERT_GE(after.size(), before.size());
  EXPECT_TRUE(std::equal(before.begin(), before.end() - 1, after.begin()));
}

}  // namespace
}  // namespace kvgate::tokenizer
