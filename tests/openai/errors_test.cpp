#include "kvgate/openai/errors.hpp"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace kvgate::openai {
namespace {

TEST(ErrorBody, IsOpenAisNestedShapeWithNulls) {
  auto body = nlohmann::json::parse(error_body(invalid_request("bad", "", "")));
  ASSERT_TRUE(body.contains("error"));
  EXPECT_EQ(body["error"]["message"], "bad");
  EXPECT_EQ(body["error"]["type"], "invalid_request_error");
  EXPECT_TRUE(body["error"]["param"].is_null());
  EXPECT_TRUE(body["error"]["code"].is_null());
}

TEST(ErrorBody, StatusesMatchTheContract) {
  EXPECT_EQ(unauthorized().status, 401);
  EXPECT_EQ(model_not_found("x").status, 404);
  EXPECT_EQ(model_not_found("x").param, "model");
  EXPECT_EQ(body_too_large(10).status, 413);
  EXPECT_EQ(no_healthy_worker("x").status, 503);
  EXPECT_EQ(upstream_failure("x").status, 502);
  EXPECT_EQ(upstream_timeout("x").status, 504);
  EXPECT_EQ(method_not_allowed("GET", "/v1/completions").status, 405);
}

TEST(StreamErrorEvents, AreOneErrorEventThenDone) {
  auto events = stream_error_events(upstream_stream_interrupted("reset"));
  ASSERT_TRUE(events.starts_with("data: {"));
  ASSERT_TRUE(events.ends_with("\n\ndata: [DONE]\n\n"));
  auto json_text = events.substr(6, events.find("\n\n") - 6);
  auto body = nlohmann::json::parse(json_text);
  EXPECT_EQ(body["error"]["code"], "upstream_stream_interrupted");
}

}  // namespace
}  // namespace kvgate::openai
