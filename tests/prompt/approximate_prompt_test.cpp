#include "kvgate/prompt/approximate_prompt.hpp"

#include <gtest/gtest.h>

#include "kvgate/tokenizer/approximate.hpp"

namespace kvgate::prompt {
namespace {

TEST(ApproximateChat, RendersRolesInOrderWithTheGenerationPrompt) {
  std::vector<openai::ChatMessage> messages{{"system", "Be brief."}, {"user", "Hi"}};
  EXPECT_EQ(render_approximate_chat(messages, true), "<|system|>\nBe brief.\n<|user|>\nHi\n<|assistant|>\n");
  EXPECT_EQ(render_approximate_chat(messages, false), "<|system|>\nBe brief.\n<|user|>\nHi\n");
}

TEST(ApproximateChat, ANewTurnExtendsThePreviousPrompt) {
  std::vector<openai::ChatMessage> first{{"user", "What is a KV cache?"}};
  auto turn_one = render_approximate_chat(first, false);
  first.push_back({"assistant", "A cache of attention keys and values."});
  first.push_back({"user", "Why does it matter?"});
  auto turn_two = render_approximate_chat(first, true);
  EXPECT_TRUE(turn_two.starts_with(turn_one));
}

TEST(ApproximatePrompt, ChatsTextAndTokenIdsGiveTheirTokens) {
  openai::ChatPrompt chat{{{"user", "hi"}}, false};
  EXPECT_EQ(approximate_prompt_tokens(chat), tokenizer::approximate_tokens("<|user|>\nhi\n"));
  EXPECT_EQ(approximate_prompt_tokens(std::string("abcdefgh")).size(), 2u);
  EXPECT_EQ(approximate_prompt_tokens(std::vector<TokenId>{7, 8, 9}), (std::vector<TokenId>{7, 8, 9}));
  EXPECT_TRUE(approximate_prompt_tokens(std::monostate{}).empty());
}

}  // namespace
}  // namespace kvgate::prompt
