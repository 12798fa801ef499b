// Every test conversation (tests/chat_template/golden/conversations.json)
// rendered with each model's chat template and encoded with its tokenizer
// must give the prompt and ids the reference gave
// (tools/goldens/make_template_goldens.mjs), or fail with its error.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "../support/gzip_file.hpp"
#include "kvgate/chat_template/chat_template.hpp"
#include "kvgate/prompt/chat_request.hpp"
#include "kvgate/tokenizer/hf_tokenizer.hpp"

namespace kvgate::chat_template {
namespace {

using json = nlohmann::json;

// The reference's fixed clock: 2026-11-30 12:00 local time.
std::tm reference_now() {
  std::tm now{};
  now.tm_year = 2026 - 1900;
  now.tm_mon = 10;
  now.tm_mday = 30;
  now.tm_hour = 12;
  return now;
}

class TemplateGolden : public testing::TestWithParam<std::string> {};

TEST_P(TemplateGolden, EveryConversationRendersAndEncodesLikeTheReference) {
  const std::string family = GetParam();
  auto tokenizer = tokenizer::Tokenizer::load_folder(std::string(KVGATE_TOKENIZERS_DIR) + "/" + family);
  auto compiled = ChatTemplate::compile(tokenizer.config()["chat_template"].get<std::string>());
  ASSERT_TRUE(compiled.has_value()) << compiled.error();
  std::ifstream conversations_file(std::string(KVGATE_TEMPLATE_GOLDEN_DIR) + "/conversations.json");
  auto conversations = nlohmann::ordered_json::parse(conversations_file);
  json golden =
      json::parse(test_support::read_gzip_file(std::string(KVGATE_TEMPLATE_GOLDEN_DIR) + "/" + family + ".json.gz"));
  ASSERT_EQ(conversations.size(), golden.size());
  ASSERT_GE(conversations.size(), 40u);
  auto tokens = prompt::special_tokens_from_config(tokenizer.config());
  tokenizer::EncodeWorkspace workspace;
  for (std::size_t index = 0; index < conversations.size(); ++index) {
    const std::string where = family + " conversation " + std::to_string(index) + " (" +
                              conversations[index]["description"].get<std::string>() + ")";
    auto input = prompt::render_input_from_request(conversations[index]["body"], *compiled, tokens);
    ASSERT_TRUE(input.has_value()) << where << ": " << input.error();
    input->now = reference_now();
    auto rendered = compiled->render(*input);
    const json& expected = golden[index];
    if (expected.contains("error")) {
      EXPECT_FALSE(rendered.has_value()) << where << " should fail with: " << expected["error"];
      if (!rendered) {
        EXPECT_EQ(rendered.error(), expected["error"].get<std::string>()) << where;
      }
      continue;
    }
    ASSERT_TRUE(rendered.has_value()) << where << ": " << rendered.error();
    EXPECT_EQ(*rendered, expected["prompt"].get<std::string>()) << where;
    std::vector<kvgate::TokenId> ids;
    ASSERT_TRUE(tokenizer.encode(*rendered, false, workspace, ids).has_value());
    EXPECT_EQ(json(ids), expected["ids"]) << where;
  }
}

INSTANTIATE_TEST_SUITE_P(Families, TemplateGolden, testing::Values("qwen3", "llama3_1", "deepseek_v3", "gemma3"));

}  // namespace
}  // namespace kvgate::chat_template
