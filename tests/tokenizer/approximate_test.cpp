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
  EXPECT_EQ(approximate_tokens("<|user|>\nhi\n"), (std::vector<TokenId>{98652, 33553, 37346}));
}

}  // namespace
}  // namespace kvgate::tokenizer
