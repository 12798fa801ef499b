// Every test conversation (tests/chat_template/golden/conversations.json)
// rendered with each model's chat template and encoded with its tokenizer
// must give the prompt and ids the reference gave
// (tools/goldens/make_template_goldens.mjs), or fail with its error.
#include <gtest/gtest.h>

#include <fstream>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
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

// The family's tokenizer, its compiled template and the test conversations.
class TemplateGolden : public testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    family = GetParam();
    model_tokenizer = std::make_unique<tokenizer::Tokenizer>(
        tokenizer::Tokenizer::load_folder(std::string(KVGATE_TOKENIZERS_DIR) + "/" + family));
    auto template_source = model_tokenizer->config()["chat_template"].get<std::string>();
    auto result = ChatTemplate::compile(template_source);
    ASSERT_TRUE(result.has_value()) << result.error();
    compiled.emplace(std::move(*result));
    std::ifstream conversations_file(std::string(KVGATE_TEMPLATE_GOLDEN_DIR) + "/conversations.json");
    conversations = nlohmann::ordered_json::parse(conversations_file);
  }

  std::string family;
  std::unique_ptr<tokenizer::Tokenizer> model_tokenizer;
  std::optional<ChatTemplate> compiled;
  nlohmann::ordered_json conversations;
};

TEST_P(TemplateGolden, EveryConversationRendersAndEncodesLikeTheReference) {
  json golden =
      json::parse(test_support::read_gzip_file(std::string(KVGATE_TEMPLATE_GOLDEN_DIR) + "/" + family + ".json.gz"));
  ASSERT_EQ(conversations.size(), golden.size());
  ASSERT_GE(conversations.size(), 40u);
  auto tokens = prompt::special_tokens_from_config(model_tokenizer->config());
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
    ASSERT_TRUE(model_tokenizer->encode(*rendered, false, workspace, ids).has_value());
    EXPECT_EQ(json(ids), expected["ids"]) << where;
  }
}

// Incremental rendering gives the full render, byte for byte (or the same
// error), on every golden conversation grown one message at a time: each
// turn resends the earlier ones, so their iterations come from the cache.
TEST_P(TemplateGolden, IncrementalRenderingMatchesTheFullRenderTurnByTurn) {
  auto tokens = prompt::special_tokens_from_config(model_tokenizer->config());
  RenderCache cache(RenderCache::kDefaultCapacityBytes, 0, 0);  // every iteration kept: every replay checked
  std::size_t renders = 0;
  std::size_t messages_rendered = 0;  // in the second pass
  std::uint64_t replayed_before = 0;
  for (int pass = 0; pass < 2; ++pass) {  // the second pass finds every turn in the cache
    replayed_before = cache.replayed_iterations();
    for (std::size_t index = 0; index < conversations.size(); ++index) {
      const auto& body = conversations[index]["body"];
      for (std::size_t turn = 1; turn <= body["messages"].size(); ++turn) {
        auto prefix = body;
        prefix["messages"].erase(prefix["messages"].begin() + static_cast<std::ptrdiff_t>(turn),
                                 prefix["messages"].end());
        const std::string where = family + " conversation " + std::to_string(index) + " (" +
                                  conversations[index]["description"].get<std::string>() + "), " +
                                  std::to_string(turn) + " messages, pass " + std::to_string(pass);
        auto input = prompt::render_input_from_request(prefix, *compiled, tokens);
        if (!input) {
          continue;  // a prefix can be malformed (a tool result without its call)
        }
        input->now = reference_now();
        auto full = compiled->render(*input);
        input->cache = &cache;
        auto incremental = compiled->render(*input);
        ++renders;
        messages_rendered += pass == 1 ? turn : 0;
        ASSERT_EQ(full.has_value(), incremental.has_value()) << where;
        if (full) {
          ASSERT_EQ(*incremental, *full) << where;
        } else {
          ASSERT_EQ(incremental.error(), full.error()) << where;
        }
      }
    }
  }
  EXPECT_GT(renders, 200u);
  // Every message was seen in the first pass, in the same state: the loops
  // over messages replay them (Qwen3's backwards scan reads the whole list,
  // so it is evaluated each time; it writes nothing out).
  EXPECT_GE(static_cast<double>(cache.replayed_iterations() - replayed_before), 0.8 * messages_rendered) << family;
  std::cout << family << ": " << renders << " renders, " << cache.replayed_iterations() << " iterations replayed, "
            << cache.evaluated_iterations() << " evaluated, " << cache.bytes() << " bytes cached\n";
}

INSTANTIATE_TEST_SUITE_P(Families, TemplateGolden, testing::Values("qwen3", "llama3_1", "deepseek_v3", "gemma3"));

}  // namespace
}  // namespace kvgate::chat_template
