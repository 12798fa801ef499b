// Exact tokenisation end to end: the gateway and kvgate-sim both configured
// with a real model folder (fetched by scripts/fetch_tokenizers.sh), so the
// engine hashes the tokens of the model's chat template and tokenizer, and
// the gateway's prefix index must predict its cache hits exactly.
#include <gtest/gtest.h>

#include <sys/wait.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>

#include "../support/gzip_file.hpp"
#include "support/fleet.hpp"

namespace kvgate::testing {

inline std::string model_folder(const std::string& family) {
  return std::string(KVGATE_TOKENIZERS_DIR) + "/" + family;
}

// A series' value in Prometheus text (-1 when absent).
inline double metric_value(const std::string& metrics, const std::string& series) {
  auto at = metrics.find("\n" + series + " ");
  return at == std::string::npos ? -1.0 : std::stod(metrics.substr(at + series.size() + 2));
}

// A copy of a model folder in the layout recent transformers versions save
// (GPT-OSS's snapshots among them): the template in chat_template.jinja,
// none in tokenizer_config.json. With `with_template` false, no template.
inline std::string folder_with_template_file(const std::string& family, const std::string& where,
                                             bool with_template = true) {
  const auto original = model_folder(family);
  std::filesystem::create_directories(where);
  std::filesystem::copy_file(original + "/tokenizer.json", where + "/tokenizer.json");
  auto config = nlohmann::ordered_json::parse(std::ifstream(original + "/tokenizer_config.json"));
  if (with_template) {
    std::ofstream(where + "/chat_template.jinja") << config["chat_template"].get<std::string>();
  }
  config.erase("chat_template");
  std::ofstream(where + "/tokenizer_config.json") << config.dump();
  return where;
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
  // One I/O thread: the render cache is per thread, and both turns must meet it.
  fleet.start_gateway("threads: 1\n");
  // A question long enough for the render cache to keep (it skips
  // iterations under 256 bytes of output: replaying them saves nothing).
  auto first = first_turn(
      "Which screws hold a 20 kg shelf on a plasterboard wall, and how far apart should they go? The wall is "
      "12.5 mm board on metal studs at 60 cm centres, the shelf is 120 cm of solid oak with two steel brackets, "
      "and it will carry books along its whole length. I have a drill, a stud finder and a spirit level, but no "
      "special anchors yet: which should I buy, and should the brackets go into the studs or between them?");
  auto [worker, answer] = fleet.turn(first);
  fleet.turn(second_turn(first, answer, "And for a brick wall?"));
  auto metrics = get(fleet.harness.admin_port(), "/metrics").body;
  // The second turn's system prompt and first question are sections seen before.
  EXPECT_NE(metrics.find("kvgate_tokenizer_segments_total{model=\"sim-model\",result=\"hit\"}"), std::string::npos)
      << metrics;
  EXPECT_NE(metrics.find("kvgate_tokenizer_segments_total{model=\"sim-model\",result=\"miss\"}"), std::string::npos);
  // The second turn's first question was replayed by the render cache.
  EXPECT_GE(metric_value(metrics, "kvgate_template_iterations_total{model=\"sim-model\",result=\"replayed\"}"), 1.0)
      << metrics;
  EXPECT_GT(metric_value(metrics, "kvgate_template_iterations_total{model=\"sim-model\",result=\"evaluated\"}"), 0.0);
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

}  // namespace kvgate::testing

namespace kvgate::testing {
namespace {

// Runs `kvgate tokenize ARGS` with `input` on stdin; returns stdout and the exit status.
std::pair<std::string, int> run_tokenize(const std::string& arguments, const std::string& input) {
  Harness harness;
  auto input_path = harness.folder() + "/input.jsonl";
  std::ofstream(input_path) << input;
  auto command = std::string(KVGATE_BINARY) + " tokenize " + arguments + " < " + input_path + " 2>/dev/null";
  auto* pipe = ::popen(command.c_str(), "r");
  EXPECT_NE(pipe, nullptr);
  std::string output;
  char buffer[4096];
  for (std::size_t read; (read = std::fread(buffer, 1, sizeof buffer, pipe)) > 0;) output.append(buffer, read);
  int status = ::pclose(pipe);
  return {output, WIFEXITED(status) ? WEXITSTATUS(status) : -1};
}

std::vector<json> lines_of(const std::string& output) {
  std::vector<json> lines;
  std::size_t start = 0;
  for (std::size_t end; (end = output.find('\n', start)) != std::string::npos; start = end + 1) {
    lines.push_back(json::parse(output.substr(start, end - start)));
  }
  return lines;
}

TEST(TokenizeCommand, ChatLinesGiveTheReferencesPromptAndIds) {
  std::ifstream conversations_file(std::string(KVGATE_SOURCE_DIR) + "/tests/chat_template/golden/conversations.json");
  auto conversations = nlohmann::ordered_json::parse(conversations_file);
  std::string input;
  for (std::size_t index = 0; index < 6; ++index) input += conversations[index]["body"].dump() + "\n";
  input += "{not json\n";
  auto [output, status] = run_tokenize("--tokenizer " + model_folder("llama3_1") + " --chat", input);
  EXPECT_EQ(status, 0);
  auto lines = lines_of(output);
  ASSERT_EQ(lines.size(), 7u) << output;
  // The goldens' prompts depend on no clock for these conversations.
  auto golden = json::parse(
      test_support::read_gzip_file(std::string(KVGATE_SOURCE_DIR) + "/tests/chat_template/golden/llama3_1.json.gz"));
  for (std::size_t index = 0; index < 6; ++index) {
    EXPECT_EQ(lines[index]["prompt"], golden[index]["prompt"]) << index;
    EXPECT_EQ(lines[index]["ids"], golden[index]["ids"]) << index;
  }
  EXPECT_TRUE(lines[6].contains("error"));
}

// A Hugging Face snapshot saved by recent transformers keeps its template in
// chat_template.jinja (GPT-OSS's does), not in tokenizer_config.json: the
// same model in that layout renders and encodes the same; a folder with
// neither is an error for --chat, with what it looked for.
TEST(TokenizeCommand, AChatTemplateFileBesideTheConfigIsTheModelsTemplate) {
  Harness harness;
  const auto original = model_folder("llama3_1");
  const auto moved = folder_with_template_file("llama3_1", harness.folder() + "/llama3_1-jinja");
  const auto bare = folder_with_template_file("llama3_1", harness.folder() + "/llama3_1-bare", false);
  std::ifstream conversations_file(std::string(KVGATE_SOURCE_DIR) + "/tests/chat_template/golden/conversations.json");
  auto conversations = nlohmann::ordered_json::parse(conversations_file);
  std::string input;
  for (std::size_t index = 0; index < 3; ++index) input += conversations[index]["body"].dump() + "\n";
  auto [expected, expected_status] = run_tokenize("--tokenizer " + original + " --chat", input);
  auto [output, status] = run_tokenize("--tokenizer " + moved + " --chat", input);
  EXPECT_EQ(expected_status, 0);
  EXPECT_EQ(status, 0);
  ASSERT_EQ(lines_of(output).size(), 3u) << output;
  EXPECT_EQ(output, expected);
  EXPECT_EQ(run_tokenize("--tokenizer " + bare + " --chat", input).second, 2);
}

// The gateway reads a folder's chat_template.jinja as the engine does: a
// model in that layout is tokenised as the same model with its template in
// the config (`kvgate tokenize` on the original folder is the reference),
// not routed without prefix data.
TEST(ExactTokens, AModelWhoseTemplateIsInItsOwnFileIsTokenisedExactly) {
  Fleet fleet;
  fleet.tokenizer = folder_with_template_file("qwen3", fleet.harness.folder() + "/qwen3-jinja");
  fleet.add_sim("a");
  fleet.start_gateway();
  auto request = chat_request(first_turn("Which wrench fits the nut under a kitchen sink?"));
  auto route = fleet.route(request);
  EXPECT_EQ(route["tokenization"], "exact") << route.dump();
  auto [reference, status] = run_tokenize("--tokenizer " + model_folder("qwen3") + " --chat", request.dump() + "\n");
  ASSERT_EQ(status, 0);
  const auto lines = lines_of(reference);
  ASSERT_EQ(lines.size(), 1u) << reference;
  EXPECT_EQ(route["input_tokens"], lines[0]["ids"].size()) << route.dump();
  auto engine = json::parse(post_json(fleet.sim("a").port(), "/v1/chat/completions", request.dump()).body);
  EXPECT_EQ(route["input_tokens"], engine["usage"]["prompt_tokens"]);
}

// A model folder with the model's config.json (Qwen3-8B's shape) prices KV
// moves at the model's own bytes per token; without one, at the default;
// a configured figure wins over both.
TEST(ExactTokens, TheModelsConfigJsonGivesItsKvBytesPerToken) {
  const auto request = chat_request(first_turn("How long does a kitchen tap washer last?"));
  {
    Fleet fleet;
    const auto folder = fleet.harness.folder() + "/qwen3-8b";
    std::filesystem::create_directories(folder);
    for (const char* file : {"tokenizer.json", "tokenizer_config.json"}) {
      std::filesystem::copy_file(model_folder("qwen3") + "/" + file, folder + "/" + file);
    }
    std::ofstream(folder + "/config.json") << R"({"architectures": ["Qwen3ForCausalLM"], "head_dim": 128,
      "hidden_size": 4096, "num_attention_heads": 32, "num_hidden_layers": 36, "num_key_value_heads": 8,
      "torch_dtype": "bfloat16"})";
    fleet.tokenizer = folder;
    fleet.add_sim("a");
    fleet.start_gateway();
    EXPECT_EQ(fleet.route(request)["kv_bytes_per_token"], 36 * 8 * 128 * 2 * 2);
    // The same folder with an FP8 KV cache configured.
    Fleet configured;
    configured.tokenizer = folder;
    configured.model_settings = "    kv_bytes_per_token: 73728\n";
    configured.add_sim("a");
    configured.start_gateway();
    EXPECT_EQ(configured.route(request)["kv_bytes_per_token"], 73'728);
  }
  {
    Fleet fleet;
    fleet.tokenizer = model_folder("qwen3");  // tokenizer files only
    fleet.add_sim("a");
    fleet.start_gateway();
    EXPECT_EQ(fleet.route(request)["kv_bytes_per_token"], 131'072);
  }
}

TEST(TokenizeCommand, TextLinesGiveIdsWithoutSpecialTokens) {
  auto [output, status] =
      run_tokenize("--tokenizer " + model_folder("qwen3"), "{\"text\": \"Hello world\"}\n{\"text\": 5}\n");
  EXPECT_EQ(status, 0);
  auto lines = lines_of(output);
  ASSERT_EQ(lines.size(), 2u) << output;
  EXPECT_EQ(lines[0]["ids"], json::array({9707, 1879}));
  EXPECT_TRUE(lines[1].contains("error"));
  EXPECT_EQ(run_tokenize("--tokenizer /nonexistent", "").second, 2);
}

// Lines are encoded several at a time; the output is the one-thread output,
// line for line in input order, whatever finishes first (long words and
// failing lines mixed with short ones).
TEST(TokenizeCommand, SeveralThreadsWriteTheOneThreadOutputInInputOrder) {
  std::mt19937 random(7);
  std::string input;
  for (int index = 0; index < 60; ++index) {
    std::string text;
    switch (index % 6) {
      case 0:
        for (int letter = 0; letter < 20000 + index * 300; ++letter) text += static_cast<char>('a' + random() % 26);
        break;
      case 1:
        text = "line " + std::to_string(index);
        break;
      case 2:
        text = std::string(static_cast<std::size_t>(3000 + index), ' ') + "x";
        break;
      case 3:
        input += "{\"text\": " + std::to_string(index) + "}\n";
        continue;  // not a string: an error line
      case 4:
        input += "{broken\n\n";
        continue;  // not JSON, then an empty line
      default:
        text = "\u6771\u4eac\u306e\u5929\u6c17 " + std::to_string(index);
        break;
    }
    input += json{{"text", text}}.dump() + "\n";
  }
  auto [one, one_status] = run_tokenize("--tokenizer " + model_folder("qwen3") + " --threads 1", input);
  auto [three, three_status] = run_tokenize("--tokenizer " + model_folder("qwen3") + " --threads 3", input);
  EXPECT_EQ(one_status, 0);
  EXPECT_EQ(three_status, 0);
  const auto lines = lines_of(three);
  ASSERT_EQ(lines.size(), 60U) << three.substr(0, 400);
  EXPECT_EQ(three, one);
  for (std::size_t index = 0; index < lines.size(); ++index) {
    const bool fails = index % 6 == 3 || index % 6 == 4;
    EXPECT_EQ(lines[index].contains("error"), fails) << index;
  }
  EXPECT_EQ(lines[1]["ids"], json::array({1056, 220, 16})) << lines[1].dump();  // "line 1"
  EXPECT_EQ(run_tokenize("--tokenizer " + model_folder("qwen3") + " --threads 0", input).second, 64);
}

}  // namespace
}  // namespace kvgate::testing
