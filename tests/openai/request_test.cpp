#include "kvgate/openai/request.hpp"
#include "kvgate/openai/prompt.hpp"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <map>
#include <string>

namespace kvgate::openai {
namespace {

constexpr auto kChat = Endpoint::chat_completions;

TEST(InspectRequest, FindsModelStreamAndUsageFlag) {
  auto summary = inspect_request(
      R"({"model":"qwen3","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"hi"}]})",
      kChat, {});
  ASSERT_TRUE(summary);
  EXPECT_EQ(summary->model, "qwen3");
  EXPECT_TRUE(summary->stream);
  EXPECT_TRUE(summary->include_usage);
  EXPECT_FALSE(summary->session_key);
}

// The default sources with the request's headers looked up from `headers`.
SessionKeyInput default_keys(const std::map<std::string, std::string>& headers = {}) {
  static const auto sources = config::default_session_key_sources();
  return {sources, session_header_values(sources, [&](std::string_view name) {
            auto found = headers.find(std::string(name));
            return found == headers.end() ? std::string_view() : std::string_view(found->second);
          })};
}

TEST(InspectRequest, SessionKeyTakesTheFirstSourcePresentInTheConfiguredOrder) {
  const char* body = R"({"model":"m","messages":[{"role":"user","content":"x"}],"user":"u","prompt_cache_key":"p"})";
  auto from_header = inspect_request(body, kChat, default_keys({{"x-session-id", "h"}}));
  EXPECT_EQ(from_header->session_key, "h");
  EXPECT_EQ(from_header->session_key_source, "header:x-session-id");
  auto from_body = inspect_request(body, kChat, default_keys());
  EXPECT_EQ(from_body->session_key, "p");
  EXPECT_EQ(from_body->session_key_source, "body:prompt_cache_key");
  EXPECT_EQ(
      inspect_request(R"({"model":"m","messages":[{"role":"user","content":"x"}],"user":"u"})", kChat, default_keys())
          ->session_key,
      "u");
  EXPECT_EQ(
      inspect_request(R"({"model":"m","messages":[{"role":"user","content":"x"}],"user":"","prompt_cache_key":""})",
                      kChat, default_keys({{"x-session-id", ""}}))
          ->session_key,
      std::nullopt);
  // No sources: no key, whatever the request holds.
  EXPECT_EQ(inspect_request(body, kChat, {})->session_key, std::nullopt);
}

// Agent clients are recognised by the default list; an absent (or empty)
// header falls through to the next source.
TEST(InspectRequest, AgentClientsSessionHeadersAreDefaultSources) {
  const char* body = R"({"model":"m","messages":[{"role":"user","content":"x"}],"user":"u"})";
  const std::pair<const char*, const char*> kClients[] = {{"x-claude-code-session-id", "claude"},
                                                          {"session-id", "codex"},
                                                          {"session_id", "codex-old"},
                                                          {"x-session-affinity", "opencode"}};
  for (const auto& [header, key] : kClients) {
    auto summary = inspect_request(body, kChat, default_keys({{header, key}}));
    ASSERT_TRUE(summary);
    EXPECT_EQ(summary->session_key, key) << header;
    EXPECT_EQ(summary->session_key_source, "header:" + std::string(header));
  }
  auto fell_through = inspect_request(body, kChat, default_keys({{"x-claude-code-session-id", ""}}));
  EXPECT_EQ(fell_through->session_key, "u");
  EXPECT_EQ(fell_through->session_key_source, "body:user");
  // kvgate's own header wins over an agent's.
  auto both = inspect_request(body, kChat, default_keys({{"x-session-id", "mine"}, {"session-id", "codex"}}));
  EXPECT_EQ(both->session_key, "mine");
}

// A configured body field of any name; a non-string value is not a key.
TEST(InspectRequest, ConfiguredBodyFieldIsASource) {
  const std::vector<config::SessionKeySource> sources = {
      config::session_key_source(config::SessionKeyPlace::body, "conversation"),
      config::session_key_source(config::SessionKeyPlace::header, "x-trace")};
  auto keys = [&](std::string_view trace) {
    SessionKeyInput input{sources, {}};
    input.header_values[1] = trace;
    return input;
  };
  auto summary = inspect_request(R"({"model":"m","messages":[{"role":"user","content":"x"}],"conversation":"c1"})",
                                 kChat, keys("t"));
  EXPECT_EQ(summary->session_key, "c1");
  EXPECT_EQ(summary->session_key_source, "body:conversation");
  auto number =
      inspect_request(R"({"model":"m","messages":[{"role":"user","content":"x"}],"conversation":7})", kChat, keys("t"));
  EXPECT_EQ(number->session_key, "t");
  EXPECT_EQ(number->session_key_source, "header:x-trace");
}

TEST(InspectRequest, CompletionsNeedAPrompt) {
  EXPECT_TRUE(inspect_request(R"({"model":"m","prompt":"x"})", Endpoint::completions, {}));
  EXPECT_TRUE(inspect_request(R"({"model":"m","prompt":[1,2,3]})", Endpoint::completions, {}));
  auto missing = inspect_request(R"({"model":"m"})", Endpoint::completions, {});
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.error().param, "prompt");
  auto wrong = inspect_request(R"({"model":"m","prompt":5})", Endpoint::completions, {});
  ASSERT_FALSE(wrong);
  EXPECT_EQ(wrong.error().message, "'prompt' must be a string or an array, not number.");
}

struct Rejected {
  std::string body;
  std::string param;
  std::string code;
};

class RejectedBodies : public testing::TestWithParam<Rejected> {};

TEST_P(RejectedBodies, Answer400WithParamAndCode) {
  auto result = inspect_request(GetParam().body, kChat, {});
  ASSERT_FALSE(result) << GetParam().body;
  EXPECT_EQ(result.error().status, 400);
  EXPECT_EQ(result.error().type, "invalid_request_error");
  EXPECT_EQ(result.error().param, GetParam().param);
  EXPECT_EQ(result.error().code, GetParam().code);
}

INSTANTIATE_TEST_SUITE_P(
    Inspect, RejectedBodies,
    testing::Values(
        Rejected{"", "", "invalid_json"}, Rejected{"{\"model\":", "", "invalid_json"},
        Rejected{"{\"model\":\"m\",\"messages\":[]} trailing", "", "invalid_json"},
        Rejected{"{\"model\":\"\xff\xfe\",\"messages\":[{\"role\":\"user\"}]}", "", "invalid_json"},  // invalid UTF-8
        Rejected{"[1,2]", "", "invalid_type"},
        Rejected{"{\"messages\":[{\"role\":\"user\"}]}", "model", "missing_required_parameter"},
        Rejected{"{\"model\":7,\"messages\":[{\"role\":\"user\"}]}", "model", "invalid_type"},
        Rejected{"{\"model\":\"m\"}", "messages", "missing_required_parameter"},
        Rejected{"{\"model\":\"m\",\"messages\":\"hi\"}", "messages", "invalid_type"},
        Rejected{"{\"model\":\"m\",\"messages\":[]}", "messages", "empty_array"},
        Rejected{"{\"model\":\"m\",\"messages\":[{\"role\":\"user\"}],\"stream\":\"yes\"}", "stream", "invalid_type"},
        Rejected{"{\"model\":\"m\",\"messages\":[{\"role\":\"user\"}],\"stream_options\":1}", "stream_options",
                 "invalid_type"},
        Rejected{"{\"model\":\"m\",\"messages\":[{\"role\":\"user\"}],\"stream_options\":{\"include_usage\":1}}",
                 "stream_options.include_usage", "invalid_type"},
        Rejected{"{\"model\":\"m\",\"messages\":[{\"role\":\"user\"}],\"user\":5}", "user", "invalid_type"},
        Rejected{"{\"model\":\"m\",\"messages\":[{\"role\":\"user\"}],\"cache_salt\":5}", "cache_salt", "invalid_type"},
        Rejected{"{\"model\":\"m\",\"messages\":[\"hi\"]}", "messages[0]", "invalid_type"},
        Rejected{"{\"model\":\"m\",\"messages\":[{\"content\":\"hi\"}]}", "messages[0].role", "invalid_value"}));

TEST(JsonNestingDepth, CountsArraysAndObjectsOutsideStrings) {
  EXPECT_EQ(json_nesting_depth(""), 0u);
  EXPECT_EQ(json_nesting_depth(R"({"a":[1,{"b":[]}]})"), 4u);
  EXPECT_EQ(json_nesting_depth(R"({"text":"[[[[{{{{ \" ]]]] [[["})"), 1u);  // brackets in a string, an escaped quote
  EXPECT_EQ(json_nesting_depth("]]]]{"), 1u);                               // stray closers do not go below zero
  EXPECT_EQ(json_nesting_depth(std::string(10'000, '[')), 10'000u);         // not JSON at all: still total
}

TEST(InspectRequest, BodiesNestedDeeperThanTheLimitAreRefusedBeforeParsing) {
  std::string content = std::string(5'000, '[') + "\"x\"" + std::string(5'000, ']');
  auto body = R"({"model":"m","messages":[{"role":"user","content":)" + content + "}]}";
  auto summary = inspect_request(body, Endpoint::chat_completions, {});
  ASSERT_FALSE(summary);
  EXPECT_EQ(summary.error().status, 400);
  EXPECT_EQ(summary.error().code, "json_too_deep");
  // Real bodies are far from the limit.
  EXPECT_TRUE(inspect_request(R"({"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"hi"}]}]})",
                              Endpoint::chat_completions, {}));
}

TEST(InspectRequest, ReadsThePromptAndCacheSalt) {
  auto chat = inspect_request(
      R"({"model":"m","cache_salt":"tenant-a","add_generation_prompt":false,"messages":[{"role":"system","content":"s"},{"role":"user","content":[{"type":"text","text":"a"},{"type":"image_url"},{"type":"text","text":"b"}]}]})",
      kChat, {});
  ASSERT_TRUE(chat);
  EXPECT_EQ(chat->cache_salt, "tenant-a");
  ASSERT_NE(chat->chat_body, nullptr);
  auto read = extract_prompt(*chat->chat_body, kChat);
  const auto& prompt = std::get<openai::ChatPrompt>(read);
  EXPECT_FALSE(prompt.add_generation_prompt);
  ASSERT_EQ(prompt.messages.size(), 2u);
  EXPECT_EQ(prompt.messages[1].role, "user");
  EXPECT_EQ(prompt.messages[1].text, "a\nb");  // text parts joined, other parts skipped

  auto ids = inspect_request(R"({"model":"m","prompt":[5,6,7]})", Endpoint::completions, {});
  EXPECT_EQ(std::get<std::vector<kvgate::TokenId>>(ids->prompt), (std::vector<kvgate::TokenId>{5, 6, 7}));
  // A batch of prompts is forwarded but cannot be routed by prefix.
  auto batch = inspect_request(R"({"model":"m","prompt":["a","b"]})", Endpoint::completions, {});
  EXPECT_TRUE(std::holds_alternative<std::monostate>(batch->prompt));
  EXPECT_FALSE(batch->cache_salt);
}

TEST(ModelsList, HasOpenAiListShape) {
  auto body = nlohmann::json::parse(models_list({{"a", ""}, {"b", ""}, {"a-lora", "a"}}, 123));
  EXPECT_EQ(body["object"], "list");
  ASSERT_EQ(body["data"].size(), 3u);
  EXPECT_EQ(body["data"][1]["id"], "b");
  EXPECT_EQ(body["data"][1]["object"], "model");
  EXPECT_EQ(body["data"][1]["created"], 123);
  EXPECT_TRUE(body["data"][1]["parent"].is_null());
  EXPECT_EQ(body["data"][2]["id"], "a-lora");
  EXPECT_EQ(body["data"][2]["parent"], "a");  // an adapter names its base model, as vLLM lists it
}

}  // namespace
}  // namespace kvgate::openai

namespace kvgate::openai {
namespace {

TEST(WithStreamUsage, AddsTheOptionAndKeepsEverythingElse) {
  EXPECT_EQ(with_stream_usage(R"({"model":"m","stream":true})"),
            R"({"stream_options":{"include_usage":true},"model":"m","stream":true})");
  EXPECT_EQ(with_stream_usage(" {} "), R"( {"stream_options":{"include_usage":true}} )");
  // Existing stream_options keep their other fields and the key order.
  EXPECT_EQ(with_stream_usage(R"({"stream":true,"stream_options":{"continuous_usage_stats":false},"model":"m"})"),
            R"({"stream":true,"stream_options":{"continuous_usage_stats":false,"include_usage":true},"model":"m"})");
  // The words inside a message are not the field.
  auto body = nlohmann::json::parse(with_stream_usage(R"({"messages":[{"content":"\"stream_options\""}]})"));
  EXPECT_EQ(body["stream_options"]["include_usage"], true);
  EXPECT_EQ(body["messages"][0]["content"], "\"stream_options\"");
}

// What a worker reads from a body kvgate salted: exactly one cache_salt,
// the tenant's, however the client spelt its own.
std::string salt_seen_by_engine(std::string_view client_body) {
  auto summary = inspect_request(client_body, Endpoint::chat_completions, {});
  EXPECT_TRUE(summary) << client_body;
  auto salted = with_cache_salt(client_body, "kvgate-t", summary->has_cache_salt_member);
  // Count the members the text really has: a duplicate would be a
  // parser-dependent bypass of isolation.
  int members = 0;
  auto callback = [&](int depth, nlohmann::json::parse_event_t event, nlohmann::json& parsed) {
    if (depth == 1 && event == nlohmann::json::parse_event_t::key && parsed == "cache_salt") {
      ++members;
    }
    return true;
  };
  auto document = nlohmann::json::parse(salted, callback);
  EXPECT_EQ(members, 1) << salted;
  EXPECT_EQ(document["messages"][0]["content"], "hi") << salted;
  return document["cache_salt"].get<std::string>();
}

TEST(WithCacheSalt, TheTenantsSaltReplacesAnyTheClientSent) {
  const std::string messages = R"("messages":[{"role":"user","content":"hi"}])";
  EXPECT_EQ(salt_seen_by_engine(R"({"model":"m",)" + messages + "}"), "kvgate-t");
  EXPECT_EQ(salt_seen_by_engine(R"({"model":"m","cache_salt":"mine",)" + messages + "}"), "kvgate-t");
  EXPECT_EQ(salt_seen_by_engine(R"({"model":"m","cache_salt":null,)" + messages + "}"), "kvgate-t");
  EXPECT_EQ(salt_seen_by_engine(R"({"model":"m","cache_salt":"",)" + messages + "}"), "kvgate-t");
  // The key spelt with an escape is the same key once parsed.
  EXPECT_EQ(salt_seen_by_engine(R"({"model":"m","\u0063ache_salt":"mine",)" + messages + "}"), "kvgate-t");
  // Duplicate keys from the client collapse into the tenant's one.
  EXPECT_EQ(salt_seen_by_engine(R"({"model":"m","cache_salt":"a","cache_salt":"b",)" + messages + "}"), "kvgate-t");
  // The salt is inserted as text when the client sent none: no re-encoding.
  EXPECT_EQ(with_cache_salt(R"({"model":"m"})", "s", false), R"({"cache_salt":"s","model":"m"})");
}

}  // namespace
}  // namespace kvgate::openai
