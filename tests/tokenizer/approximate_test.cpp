#include "kvgate/tokenizer/approximate.hpp"

#include <gtest/gtest.h>

namespace kvgate::tokenizer {
namespace {

TEST(ApproximateTokens, FourBytesPerTokenAndALastPartialOne) {
  EXPECT_EQ(approximate_tokens("").size(), 0u);
  EXPECT_EQ(approximate_tokens("abcd").size(), 1u);
  EXPECT_EQ(approximate_tokens("abcdefghi").size(), 3u);
  for (auto id : approximate_tokens("some text of a prompt")) {
    EXPECT_GE(id, 1000u);
    EXPECT_LT(id, 101000u);
  }
}

TEST(ApproximateTokens, AppendingTextKeepsAllButTheLastToken) {
  auto short_tokens = approximate_tokens("Hello, wor");
  auto long_tokens = approximate_tokens("Hello, world and more");
  ASSERT_GT(long_tokens.size(), short_tokens.size());
  for (std::size_t index = 0; index + 1 < short_tokens.size(); ++index) {
    EXPECT_EQ(short_tokens[index], long_tokens[index]) << index;
  }
}

TEST(ApproximateTokens, GoldenIds) {
  // Pinned: the simulator and the gateway must agree on these.
  EXPECT_EQ(approximate_tokens("<|user|>\nhi\n"), (std::vector<prefix::TokenId>{98652, 33553, 37346}));
}

TEST(ApproximateChat, RendersRolesInOrderWithTheGenerationPrompt) {
  std::vector<ApproximateMessage> messages{{"system", "Be brief."}, {"user", "Hi"}};
  EXPECT_EQ(render_approximate_chat(messages, true), "<|system|>\nBe brief.\n<|user|>\nHi\n<|assistant|>\n");
  EXPECT_EQ(render_approximate_chat(messages, false), "<|system|>\nBe brief.\n<|user|>\nHi\n");
}

TEST(ApproximateChat, ANewTurnExtendsThePreviousPrompt) {
  std::vector<ApproximateMessage> first{{"user", "What is a KV cache?"}};
  auto turn_one = render_approximate_chat(first, false);
  first.push_back({"assistant", "A cache of attention keys and values."});
  first.push_back({"user", "Why does it matter?"});
  auto turn_two = render_approximate_chat(first, true);
  EXPECT_TRUE(turn_two.starts_with(turn_one));
}

}  // namespace
}  // namespace kvgate::tokenizer
