#include "request_body.hpp"

#include <gtest/gtest.h>

namespace kvgate::load {
namespace {

using nlohmann::json;

TEST(RequestBody, CarriesTheRunsExtraFieldsBesideItsOwn) {
  const json extra = {{"logit_bias", {{"3", -100}, {"258", -100}}}, {"temperature", 0}};
  const auto body = json::parse(completion_body("m", "hello", 8, extra));
  EXPECT_EQ(body["prompt"], "hello");
  EXPECT_EQ(body["max_tokens"], 8);
  EXPECT_TRUE(body["stream"].get<bool>());
  EXPECT_EQ(body["logit_bias"]["258"], -100);
  EXPECT_EQ(body["temperature"], 0);
  const auto chat = json::parse(chat_body("m", json::array({{{"role", "user"}, {"content", "hi"}}}), 4, extra));
  EXPECT_EQ(chat["messages"][0]["content"], "hi");
  EXPECT_EQ(chat["logit_bias"]["3"], -100);
}

TEST(RequestBody, AnExtraFieldReplacesTheBodysOwnAndANonObjectAddsNothing) {
  EXPECT_EQ(json::parse(completion_body("m", "x", 8, {{"max_tokens", 2}}))["max_tokens"], 2);
  const auto plain = json::parse(completion_body("m", "x", 8, json::array({1, 2})));
  EXPECT_EQ(plain.size(), json::parse(completion_body("m", "x", 8)).size());
}

TEST(RequestBody, AHistoryWithASplitCharacterStillMakesABody) {
  const std::string split = std::string("caf") + static_cast<char>(0xC3);  // half of 'é'
  const auto body = json::parse(chat_body("m", json::array({{{"role", "assistant"}, {"content", split}}}), 4));
  EXPECT_EQ(body["messages"][0]["content"].get<std::string>().substr(0, 3), "caf");
}

}  // namespace
}  // namespace kvgate::load
