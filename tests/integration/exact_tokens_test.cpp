// Exact tokenisation end to end: the gateway and kvgate-sim both configured
// with a real model folder (fetched by scripts/fetch_tokenizers.sh), so the
// engine hashes the tokens of the model's chat template and tokenizer, and
// the gateway's prefix index must predict its cache hits exactly.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "support/fleet.hpp"

namespace kvgate::testing {
namespace {

std::string model_folder(const std::string& family) {
  return std::string(KVGATE_TOKENIZERS_DIR) + "/" + family;
}

TEST(ExactTokens, TheDryRunPredictsTheEnginesCacheHitsWithTheModelsTokenizer) {
  Fleet fleet;
  fleet.tokenizer = model_folder("qwen3");
  fleet.add_sim("a");
  fleet.add_sim("b");
  fleet.start_gateway();
  auto first = first_turn("My kitchen tap drips after I close it. What do I need to fix it?");
  auto [served_by, answer] = fleet.turn(first);
  fleet.wait_synced("a");
  fleet.wait_synced("b");
  auto follow_up = chat_request(second_turn(first, answer, "And which wrench fits the nut under the sink?"));
  auto route = fleet.route(follow_up);
  EXPECT_EQ(route["tokenization"], "exact");
  EXPECT_EQ(route["worker"], served_by) << route.dump();
  EXPECT_GT(Fleet::predicted(route, served_by), 0u);
  for (const auto* id : {"a", "b"}) {
    EXPECT_EQ(Fleet::predicted(route, id), fleet.engine_cached(id, follow_up)) << id << ": " << route.dump();
  }
  auto engine = json::parse(post_json(fleet.sim(served_by).port(), "/v1/chat/completions", follow_up.dump()).body);
  EXPECT_EQ(route["input_tokens"], engine["usage"]["prompt_tokens"]);
}

TEST(ExactTokens, EarlierTurnsComeFromTheSegmentCache) {
  Fleet fleet;
  fleet.tokenizer = model_folder("qwen3");
  fleet.add_sim("a");
  fleet.start_gateway();
  auto first = first_turn("Which screws hold a 20 kg shelf on a plasterboard wall, and how far apart should they go?");
  auto [worker, answer] = fleet.turn(first);
  fleet.turn(second_turn(first, answer, "And for a brick wall?"));
  auto metrics = get(fleet.harness.admin_port(), "/metrics").body;
  // The second turn's system prompt and first question are sections seen before.
  EXPECT_NE(metrics.find("kvgate_tokenizer_segments_total{model=\"sim-model\",result=\"hit\"}"), std::string::npos)
      << metrics;
  EXPECT_NE(metrics.find("kvgate_tokenizer_segments_total{model=\"sim-model\",result=\"miss\"}"), std::string::npos);
}

TEST(ExactTokens, ATemplateErrorIsA400WithTheTemplatesMessage) {
  Fleet fleet;
  fleet.tokenizer = model_folder("gemma3");
  fleet.add_sim("a");
  fleet.start_gateway();
  // Gemma's template raises unless user and assistant turns alternate.
  auto messages = json::array({{{"role", "user"}, {"content", "One."}}, {{"role", "user"}, {"content", "Two."}}});
  auto response = post_json(fleet.harness.api_port(), "/v1/chat/completions", chat_request(messages).dump());
  EXPECT_EQ(response.status, 400);
  auto error = json::parse(response.body)["error"];
  EXPECT_EQ(error["message"], "Conversation roles must alternate user/assistant/user/assistant/...");
  EXPECT_EQ(error["code"], "chat_template_error");
  EXPECT_NE(
      get(fleet.harness.admin_port(), "/metrics").body.find("kvgate_chat_template_errors_total{model=\"sim-model\"} 1"),
      std::string::npos);
  // The engine rejects the same request with the same message.
  auto engine = post_json(fleet.sim("a").port(), "/v1/chat/completions", chat_request(messages).dump());
  EXPECT_EQ(engine.status, 400);
  EXPECT_NE(engine.body.find("Conversation roles must alternate"), std::string::npos);
  // Alternating turns pass.
  messages[1]["role"] = "assistant";
  messages.push_back({{"role", "user"}, {"content", "Three."}});
  EXPECT_EQ(post_json(fleet.harness.api_port(), "/v1/chat/completions", chat_request(messages).dump()).status, 200);
}

}  // namespace
}  // namespace kvgate::testing
