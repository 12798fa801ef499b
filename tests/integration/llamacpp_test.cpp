// kvgate in front of real llama.cpp servers (support/llama_server.hpp): the
// workers are configured with nothing but their URLs, and kvgate must tell
// what they are from the engines themselves, model their slots, predict
// their prompt-cache hits to the block, relay their streams unchanged and
// pass on their errors. The small random-weights model keeps each test to
// seconds; what it answers is gibberish, which does not matter here.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "support/admin.hpp"
#include "support/harness.hpp"
#include "support/http_client.hpp"
#include "support/llama_server.hpp"

namespace kvgate::testing {
namespace {

using nlohmann::json;
using namespace std::chrono_literals;

constexpr const char* kModel = "llama-2-tiny-random.gguf";

// A long system prompt shared by a family of conversations (several
// blocks), so later turns and other conversations have prefixes to reuse.
std::string system_prompt(int family) {
  std::string text = "You are assistant number " + std::to_string(family) + " of the hardware store.";
  for (int rule = 0; rule < 12; ++rule) {
    text += " Rule " + std::to_string(rule) + ": name the aisle, the part and the tool for every question.";
  }
  return text;
}

json chat(const json& messages, int max_tokens) {
  return {{"model", "tiny"}, {"messages", messages}, {"max_tokens", max_tokens}, {"temperature", 0}, {"seed", 1}};
}

// Workers given by URL only: every engine key is left to the engine.
std::string bare_workers(const std::vector<LlamaServer*>& servers) {
  std::string yaml;
  for (std::size_t index = 0; index < servers.size(); ++index) {
    yaml += "      - {id: r" + std::to_string(index) + ", url: \"" + servers[index]->url() + "\"}\n";
  }
  return yaml;
}

std::string model_yaml(const std::string& tokenizer, const std::string& workers) {
  return "models:\n  - name: \"tiny\"\n    tokenizer: \"" + tokenizer + "\"\n    block_size: 16\n    workers:\n" +
         workers;
}

TEST(LlamaServer, ItsKindAndSlotsAreReadFromItAndItsHitsPredictedToTheBlock) {
  Harness harness;
  std::string skip;
  LlamaServer r0(harness, "r0", kModel, {"-np", "2", "-c", "4096", "--cache-ram", "0"}, skip);
  if (!skip.empty()) {
    GTEST_SKIP() << skip;
  }
  LlamaServer r1(harness, "r1", kModel, {"-np", "2", "-c", "4096", "--cache-ram", "0"}, skip);
  const auto tokenizer = llama_tokenizer_folder(harness.folder() + "/tokenizer");
  ASSERT_FALSE(tokenizer.empty());
  harness.start_gateway("routing: {policy: cache_aware}\nmetrics_scrape: {interval: 200ms}\n",
                        model_yaml(tokenizer, bare_workers({&r0, &r1})));
  for (const auto* id : {"r0", "r1"}) {
    ASSERT_TRUE(eventually([&] {
      const auto state = worker_state(harness, id);
      return state["engine_detected"].is_object() && state["cache_model"] == "sequences";
    })) << worker_state(harness, id).dump();
    const auto state = worker_state(harness, id);
    EXPECT_EQ(state["engine_detected"]["kind"], "llamacpp");
    EXPECT_EQ(state["engine_detected"]["slots"], 2);
    EXPECT_EQ(state["engine_detected"]["slot_context_tokens"], 2048);
    EXPECT_EQ(state["engine_kind"], "llamacpp");
    EXPECT_EQ(state["slots"]["total"], 2);
    EXPECT_FALSE(state["engine_keys_configured"]["slots"].get<bool>());
  }
  // The folder made from the GGUF carries the model's shape: one token's KV
  // in llama-server's F16 cache, 1 layer x 2 KV heads x 4 (8 / 2) x 2 x 2.
  const auto route = json::parse(
      post_json(harness.admin_port(), "/debug/route",
                chat(json::array({{{"role", "user"}, {"content", "Which screws hold a shelf?"}}}), 4).dump())
          .body);
  EXPECT_EQ(route["kv_bytes_per_token"], 32) << route.dump();
  // Six conversations over two system prompts, one turn at a time: more
  // conversations than the fleet's four slots, so sequences are displaced
  // and kvgate must follow llama.cpp's choice of slot.
  std::vector<json> conversations;
  for (int conversation = 0; conversation < 6; ++conversation) {
    conversations.push_back(json::array({{{"role", "system"}, {"content", system_prompt(conversation % 2)}}}));
  }
  int answered = 0;
  for (int turn = 0; turn < 4; ++turn) {
    for (int conversation = 0; conversation < 6; ++conversation) {
      auto& messages = conversations[conversation];
      messages.push_back({{"role", "user"},
                          {"content", "Conversation " + std::to_string(conversation) + ", question " +
                                          std::to_string(turn) + ": which screws hold a shelf bracket?"}});
      const auto response = post_json(harness.api_port(), "/v1/chat/completions", chat(messages, 8).dump(),
                                      {{"x-session-id", "c" + std::to_string(conversation)}});
      ASSERT_EQ(response.status, 200) << response.body;
      messages.push_back(json::parse(response.body)["choices"][0]["message"]);
      ++answered;
    }
  }
  double exact = 0;
  double all = 0;
  auto count_predictions = [&] {
    exact = all = 0;
    for (const auto* id : {"r0", "r1"}) {
      for (const auto* outcome : {"exact", "over", "under"}) {
        const auto count = metric_value(
            harness, std::string("kvgate_cache_predictions_total{outcome=\"") + outcome + "\",worker=\"" + id + "\"}");
        all += count;
        exact += std::string(outcome) == "exact" ? count : 0;
      }
    }
    return all == answered;  // the last outcome is recorded after its response was written
  };
  EXPECT_TRUE(eventually(count_predictions));
  for (const auto* id : {"r0", "r1"}) {
    EXPECT_FALSE(worker_state(harness, id)["drifting"].get<bool>()) << id;
    // The engine never showed a RAM cache it does not have (--cache-ram 0).
    EXPECT_NE(worker_state(harness, id)["ram_cache_observed"], json(true)) << id;
  }
  RecordProperty("prediction_match", std::to_string(exact / all));
  EXPECT_GE(exact / all, 0.9) << exact << " of " << all << " predictions matched the engine within a block";
  // Its own prefill counters price it (from the next scrape on), not an
  // H100's priors.
  for (const auto* id : {"r0", "r1"}) {
    EXPECT_TRUE(eventually([&] {
      return worker_state(harness, id)["prefill_cost"]["priced"]["level_source"] == "engine_counters";
    })) << worker_state(harness, id)["prefill_cost"].dump();
    EXPECT_GT(worker_state(harness, id)["prefill_cost"]["priced"]["engine_ms_per_token"].get<double>(), 0);
  }
}

// Every event of a stream as the engine sent it, with what differs between
// two runs (ids, timings' figures) left out.
json stream_shape(const std::string& event) {
  if (event == "[DONE]") {
    return event;
  }
  auto parsed = json::parse(event);
  for (const auto* key : {"id", "created", "timings", "system_fingerprint"}) {
    parsed.erase(key);
  }
  // The second run of the same prompt is served from the slot.
  if (parsed.contains("usage") && parsed["usage"].contains("prompt_tokens_details")) {
    parsed["usage"]["prompt_tokens_details"].erase("cached_tokens");
  }
  return parsed;
}

std::vector<std::string> read_stream(int port, const json& body) {
  EventStream stream(port, "/v1/chat/completions", body.dump());
  EXPECT_EQ(stream.status(), 200);
  return stream.until_done();
}

// A slot engine's wait for a free slot, learned from the engine's own
// answers: a streamed request that found the slot free teaches how long one
// is held, one sent while the slot was busy how long it waited beyond its
// prefill. The gateway tracks which of its requests holds the slot, and
// forecasts its release from that.
TEST(LlamaServer, TheWaitForABusySlotIsLearnedFromTheEnginesAnswers) {
  Harness harness;
  std::string skip;
  LlamaServer r0(harness, "r0", kModel, {"-np", "1", "-c", "4096", "--cache-ram", "0"}, skip);
  if (!skip.empty()) {
    GTEST_SKIP() << skip;
  }
  const auto tokenizer = llama_tokenizer_folder(harness.folder() + "/tokenizer");
  ASSERT_FALSE(tokenizer.empty());
  harness.start_gateway("routing: {policy: cache_aware}\nmetrics_scrape: {interval: 200ms}\n",
                        model_yaml(tokenizer, bare_workers({&r0})));
  ASSERT_TRUE(eventually([&] { return worker_state(harness, "r0")["slots"]["total"] == 1; }))
      << worker_state(harness, "r0").dump();
  auto streamed = [](const std::string& question, int max_tokens) {
    auto body = chat(json::array({{{"role", "user"}, {"content", question}}}), max_tokens);
    body["stream"] = true;
    body["ignore_eos"] = true;  // llama-server: generate to max_tokens
    return body;
  };
  const auto slot_wait = [&] { return worker_state(harness, "r0")["slot_wait"]; };
  read_stream(harness.api_port(), streamed("Which screws hold a shelf?", 16));
  ASSERT_TRUE(eventually([&] { return slot_wait()["hold_samples"].get<int>() >= 1; })) << slot_wait().dump();
  EXPECT_EQ(slot_wait()["from"], "holds");
  EXPECT_GT(slot_wait()["ms_per_request_ahead"].get<double>(), 0);
  // One request holds the slot while the next is sent: that one waits.
  for (int round = 0; round < 3; ++round) {
    EventStream holder(harness.api_port(), "/v1/chat/completions",
                       streamed("Tell me about every screw in the store, round " + std::to_string(round), 200).dump());
    ASSERT_EQ(holder.status(), 200);
    ASSERT_TRUE(holder.next_event());  // generating: the slot is taken
    EXPECT_EQ(slot_wait()["running"], 1) << slot_wait().dump();
    EXPECT_EQ(slot_wait()["deferred"], 0);
    std::thread drain([&] { holder.rest(); });
    read_stream(harness.api_port(), streamed("Which nails hold a frame, round " + std::to_string(round) + "?", 8));
    drain.join();
  }
  ASSERT_TRUE(eventually([&] { return slot_wait()["running"] == 0; })) << slot_wait().dump();
  EXPECT_EQ(slot_wait()["deferred"], 0);
  EXPECT_GE(slot_wait()["hold_samples"].get<int>(), 7);  // every request's hold, waited or not
  EXPECT_EQ(slot_wait()["release_ms"].size(), 1u);
  EXPECT_GT(slot_wait()["mean_hold_ms"].get<double>(), 0);
  ASSERT_TRUE(eventually([&] { return slot_wait()["wait_samples"].get<int>() >= 3; })) << slot_wait().dump();
  EXPECT_EQ(slot_wait()["from"], "waits");
  EXPECT_GT(slot_wait()["ms_per_request_ahead"].get<double>(), 0);
}

TEST(LlamaServer, TheRelayedStreamIsTheEnginesAndItsErrorsReachTheClient) {
  Harness harness;
  std::string skip;
  LlamaServer r0(harness, "r0", kModel, {"-np", "1", "-c", "1024", "--cache-ram", "0"}, skip);
  if (!skip.empty()) {
    GTEST_SKIP() << skip;
  }
  const auto tokenizer = llama_tokenizer_folder(harness.folder() + "/tokenizer");
  ASSERT_FALSE(tokenizer.empty());
  harness.start_gateway("routing: {policy: cache_aware}\n", model_yaml(tokenizer, bare_workers({&r0})));
  auto body = chat(json::array({{{"role", "system"}, {"content", system_prompt(0)}},
                                {{"role", "user"}, {"content", "Where is the wood glue?"}}}),
                   12);
  body["stream"] = true;
  body["stream_options"] = {{"include_usage", true}};
  const auto direct = read_stream(r0.port(), body);
  const auto relayed = read_stream(harness.api_port(), body);
  ASSERT_EQ(relayed.size(), direct.size());
  for (std::size_t index = 0; index < direct.size(); ++index) {
    EXPECT_EQ(stream_shape(relayed[index]), stream_shape(direct[index])) << "event " << index;
  }
  // A prompt over the slot's context: the engine's own 400, and the
  // gateway serves the next request.
  std::string long_text;
  for (int sentence = 0; sentence < 200; ++sentence) {
    long_text += "The shelf bracket number " + std::to_string(sentence) + " needs two screws. ";
  }
  const auto too_long = post_json(harness.api_port(), "/v1/chat/completions",
                                  chat(json::array({{{"role", "user"}, {"content", long_text}}}), 4).dump());
  EXPECT_EQ(too_long.status, 400);
  EXPECT_NE(too_long.body.find("exceed_context_size_error"), std::string::npos) << too_long.body;
  const auto after = post_json(harness.api_port(), "/v1/chat/completions",
                               chat(json::array({{{"role", "user"}, {"content", "And the hinges?"}}}), 4).dump());
  EXPECT_EQ(after.status, 200) << after.body;
  EXPECT_FALSE(worker_state(harness, "r0")["drifting"].get<bool>());
}

TEST(LlamaServer, AReplicaKilledMidStreamEndsTheStreamWithAnError) {
  Harness harness;
  std::string skip;
  LlamaServer r0(harness, "r0", kModel, {"-np", "1", "-c", "4096", "--cache-ram", "0"}, skip);
  if (!skip.empty()) {
    GTEST_SKIP() << skip;
  }
  harness.start_gateway("routing: {policy: cache_aware}\n",
                        "models:\n  - name: \"tiny\"\n    workers:\n" + bare_workers({&r0}));
  auto body = chat(json::array({{{"role", "user"}, {"content", "Tell me about every screw in the store."}}}), 3000);
  body["stream"] = true;
  body["ignore_eos"] = true;  // llama-server: keep generating to max_tokens
  EventStream stream(harness.api_port(), "/v1/chat/completions", body.dump());
  ASSERT_EQ(stream.status(), 200);
  ASSERT_TRUE(stream.next_event());  // the engine is generating
  r0.kill_hard();
  std::vector<std::string> rest;
  while (auto event = stream.next_event()) {
    rest.push_back(*event);
    if (*event == "[DONE]") {
      break;
    }
  }
  ASSERT_GE(rest.size(), 2u);
  EXPECT_EQ(rest.back(), "[DONE]");
  const auto error = json::parse(rest[rest.size() - 2]);
  EXPECT_TRUE(error.contains("error")) << rest[rest.size() - 2];
}

}  // namespace
}  // namespace kvgate::testing
