#include "kvgate/prompt/llmd_sim_prompt.hpp"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

namespace kvgate::prompt {
namespace {

using Json = nlohmann::ordered_json;

// llm-d-inference-sim's RenderMessages: "### role: content\n" per message.
TEST(LlmdSimPrompt, RendersEachMessageAsTheSimulatorDoes) {
  auto body = Json::parse(R"({"messages": [
    {"role": "system", "content": "Be brief."},
    {"role": "user", "content": [{"type": "text", "text": "Look:"}, {"type": "image_url", "image_url": {"url": "http://x/a.png"}},
                                 {"type": "input_audio", "input_audio": {"data": "AAA"}}, {"type": "text", "text": "what?"}]},
    {"role": "assistant", "content": null, "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "find", "arguments": "{\"q\":1}"}},
                                                           {"id": "c2", "type": "function", "function": {"arguments": "{}"}}]},
    {"role": "tool", "tool_call_id": "c1", "content": "found"},
    {"content": "no role"}
  ]})");
  EXPECT_EQ(render_llmd_sim_chat(body),
            "### system: Be brief.\n"
            "### user: Look:\nimage: http://x/a.png\nwhat?\n"
            "### assistant: [find({\"q\":1})]\n"
            "### tool(c1): found\n"
            "### : no role\n");
}

TEST(LlmdSimPrompt, AnyJsonIsTaken) {
  EXPECT_EQ(render_llmd_sim_chat(Json::parse("[1, 2]")), "");
  EXPECT_EQ(render_llmd_sim_chat(Json::parse(R"({"messages": "text"})")), "");
  EXPECT_EQ(render_llmd_sim_chat(Json::parse(R"({"messages": [7, {"role": 3, "content": {"a": 1}}]})")),
            "### : \n### : \n");
}

TEST(LlmdSimPrompt, TextPromptsAreTokenisedAsTheyAreAndIdsTakenAsGiven) {
  openai::RequestSummary text;
  text.prompt = std::string("Once upon a time");
  EXPECT_EQ(llmd_sim_prompt_tokens(text).size(), 4u);
  openai::RequestSummary ids;
  ids.prompt = std::vector<TokenId>{5, 6, 7};
  EXPECT_EQ(llmd_sim_prompt_tokens(ids), (std::vector<TokenId>{5, 6, 7}));
  EXPECT_TRUE(llmd_sim_prompt_tokens(openai::RequestSummary{}).empty());
}

}  // namespace
}  // namespace kvgate::prompt
