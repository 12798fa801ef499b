// A foreign engine behind kvgate: llm-d's vLLM simulator (llm-d-inference-
// sim), which kvgate did not write. Its replicas dial out to kvgate's
// kv_events.listen with vLLM's msgpack events (both forms), report vLLM's
// metrics, and tokenise with their simulated tokenizer, which kvgate
// reproduces (models[].stand_in_tokenizer: llm_d_inference_sim). Checked:
// the engine kind read from its metrics, kvgate's token counts and cached
// token predictions equal to what the simulator reports, no drift, a
// restarted replica forgotten, and what the listener cannot place counted.
#include <gtest/gtest.h>
#include <zmq.h>

#include <cstring>
#include <map>
#include <regex>
#include <thread>

#include <nlohmann/json.hpp>

#include "support/admin.hpp"
#include "support/harness.hpp"
#include "support/llmd_sim_process.hpp"

namespace kvgate::testing {
namespace {

using nlohmann::json;
using namespace std::chrono_literals;

std::map<std::string, std::string> parse_receipt(const std::string& receipt) {
  static const std::regex kField(R"(([a-z_]+)=([^;]+))");
  std::map<std::string, std::string> fields;
  for (std::sregex_iterator at(receipt.begin(), receipt.end(), kField), end; at != end; ++at) {
    fields[(*at)[1]] = (*at)[2];
  }
  return fields;
}

std::uint64_t metric_value(const std::string& text, const std::string& series) {
  auto at = text.find("\n" + series + " ");
  return at == std::string::npos ? 0 : std::stoull(text.substr(at + series.size() + 2));
}

constexpr const char* kSystem =
    "You are the support assistant of a large hardware store. Answer precisely, list the parts needed, and say "
    "which aisle they are in. Never invent prices; if a part is out of stock, say so and name a substitute.";

class LlmdFleet : public ::testing::TestWithParam<bool> {
 protected:
  // Replicas of llm-d-inference-sim behind kvgate, their events on the
  // gateway's listener.
  void start(int replicas, const std::string& settings = "") {
    listen_port_ = free_loopback_port();
    for (int at = 0; at < replicas; ++at) {
      ids_.push_back("l" + std::to_string(at));
      sims_.push_back(std::make_unique<LlmdSimProcess>(harness_, ids_.back(), listener(), GetParam()));
    }
    harness_.start_gateway(
        "routing: {policy: cache_aware, receipt: true}\nhealth_check: {interval: 200ms}\n"
        "metrics_scrape: {interval: 200ms}\n"
        "kv_events: {listen: \"" +
            listener() + "\"}\n" + settings,
        models_yaml());
    for (std::size_t at = 0; at < sims_.size(); ++at) {
      warm_up(at);
    }
  }

  // A PUB socket drops what it sends before its connection is up (ZMQ's
  // slow joiner): a replica's first batches may never arrive. Tests need a
  // known start: prompts of their own until the gateway has one of its
  // batches.
  // 40 of the simulator's tokens (a word each): two full blocks.
  static std::string warm_up_prompt(int attempt) {
    std::string prompt = "warm-up " + std::to_string(attempt);
    for (int word = 0; word < 40; ++word) {
      prompt += " w" + std::to_string(word);
    }
    return prompt;
  }

  void warm_up(std::size_t at) {
    const auto batches_before = worker_state(harness_, ids_[at])["kv_events"]["batches"].get<int>();
    for (int attempt = 0; attempt < 30; ++attempt) {
      post_json(sims_[at]->port(), "/v1/completions",
                json{{"model", "sim-model"}, {"prompt", warm_up_prompt(attempt)}, {"max_tokens", 1}}.dump());
      if (eventually(
              [&] { return worker_state(harness_, ids_[at])["kv_events"]["batches"].get<int>() > batches_before; },
              1500ms)) {
        return;
      }
    }
    FAIL() << "the gateway never got a batch from " << ids_[at];
  }

  [[nodiscard]] std::string listener() const { return "tcp://127.0.0.1:" + std::to_string(listen_port_); }

  [[nodiscard]] std::string models_yaml() const {
    std::string models =
        "models:\n  - name: \"sim-model\"\n    block_size: 16\n    stand_in_tokenizer: llm_d_inference_sim\n"
        "    workers:\n";
    for (std::size_t at = 0; at < sims_.size(); ++at) {
      models += "      - {id: \"" + ids_[at] + "\", url: \"" + sims_[at]->url() + "\", kv_events: listen}\n";
    }
    return models;
  }

  // A request through the proxy, its receipt's prediction against the
  // engine's usage.
  struct Turn {
    std::string worker;
    int predicted = -1;
    int cached = -1;
    int prompt_tokens = -1;
    std::string reply;
  };
  Turn send(const json& messages, const std::string& session) {
    json body = {{"model", "sim-model"}, {"max_tokens", 6}, {"messages", messages}};
    auto response = post_json(harness_.api_port(), "/v1/chat/completions", body.dump(), {{"x-session-id", session}});
    EXPECT_EQ(response.status, 200) << response.body;
    Turn turn;
    if (response.status != 200) {
      return turn;
    }
    auto receipt = parse_receipt(response.header("x-kvgate-route"));
    auto reply = json::parse(response.body);
    turn.worker = response.header("x-kvgate-worker");
    turn.predicted = std::stoi(receipt["predicted_cached"]);
    turn.cached = reply["usage"]["prompt_tokens_details"]["cached_tokens"].get<int>();
    turn.prompt_tokens = reply["usage"]["prompt_tokens"].get<int>();
    turn.reply = reply["choices"][0]["message"]["content"].get<std::string>();
    return turn;
  }

  // The gateway's input tokens for a body (its dry run) equal the engine's.
  int gateway_tokens(const json& messages) {
    json body = {{"model", "sim-model"}, {"max_tokens", 6}, {"messages", messages}};
    auto dry = post_json(harness_.admin_port(), "/debug/route", body.dump());
    EXPECT_EQ(dry.status, 200) << dry.body;
    return json::parse(dry.body)["input_tokens"].get<int>();
  }

  Harness harness_;
  int listen_port_ = 0;
  std::vector<std::string> ids_;
  std::vector<std::unique_ptr<LlmdSimProcess>> sims_;
};

// The engine says what it is (vllm: metrics), kvgate's tokens are its
// tokens, and every turn's predicted cached tokens are what the simulator
// reports, for sessions that stay and sessions that share the system prompt.
TEST_P(LlmdFleet, PredictionsEqualTheSimulatorsReportedHits) {
  start(2);
  ASSERT_TRUE(eventually([&] {
    for (const auto& id : ids_) {
      auto engine = worker_state(harness_, id)["engine_detected"];
      if (!engine.is_object() || engine["kind"] != "vllm") {
        return false;
      }
    }
    return true;
  }));
  std::map<std::string, json> histories;
  int turns = 0;
  int exact = 0;
  int cached_turns = 0;
  for (int round = 0; round < 4; ++round) {
    for (const std::string session : {"deck", "fence", "shed"}) {
      auto& history = histories[session];
      if (history.is_null()) {
        history = json::array({{{"role", "system"}, {"content", kSystem}},
                               {{"role", "user"}, {"content", "Session " + session + ": which screws hold it?"}}});
      } else {
        history.push_back({{"role", "user"},
                           {"content", "Round " + std::to_string(round) + " for the " + session +
                                           ": and what about the fixings, exactly?"}});
      }
      const int expected_tokens = gateway_tokens(history);
      auto turn = send(history, session);
      ++turns;
      EXPECT_EQ(turn.prompt_tokens, expected_tokens) << "kvgate's tokens are not the simulator's";
      EXPECT_EQ(turn.predicted, turn.cached) << session << " round " << round << " on " << turn.worker;
      exact += turn.predicted == turn.cached ? 1 : 0;
      cached_turns += turn.cached > 0 ? 1 : 0;
      history.push_back({{"role", "assistant"}, {"content", turn.reply}});
    }
    // Let the round's events arrive (the simulator batches them for up to
    // a second) so the next round is predicted from them, not only from
    // kvgate's own routing.
    std::this_thread::sleep_for(1200ms);
  }
  EXPECT_EQ(exact, turns);
  EXPECT_GE(cached_turns, 9);  // every later turn hits its history
  auto metrics = get(harness_.admin_port(), "/metrics").body;
  EXPECT_EQ(metric_value(metrics, "kvgate_kv_events_unmatched_total"), 0u);
  for (const auto& id : ids_) {
    auto worker = worker_state(harness_, id);
    EXPECT_EQ(worker["drifting"], false) << worker.dump();
    EXPECT_EQ(worker["kv_events"]["connected"], true) << worker.dump();
    EXPECT_GT(worker["kv_events"]["batches"].get<int>(), 0) << worker.dump();
    EXPECT_EQ(worker["kv_events"]["decode_errors"], 0) << worker.dump();
  }
}

// A replica restarted on its port starts its sequence again: kvgate sees
// the restart, forgets what it held, and predicts (as the engine reports)
// no hit for a prompt it served before.
TEST_P(LlmdFleet, ARestartedReplicaIsForgotten) {
  start(1);
  auto history = json::array(
      {{{"role", "system"}, {"content", kSystem}}, {{"role", "user"}, {"content", "Which hinges for a heavy gate?"}}});
  auto first = send(history, "gate");
  ASSERT_EQ(first.worker, "l0");
  std::this_thread::sleep_for(1200ms);  // the simulator's batch, flushed within a second
  auto again = send(history, "gate");
  EXPECT_GT(again.cached, 0);
  EXPECT_EQ(again.predicted, again.cached);

  const int port = sims_[0]->port();
  sims_[0]->kill_hard();
  sims_[0] = std::make_unique<LlmdSimProcess>(harness_, "l0-again", listener(), GetParam(), port);
  // Its counters start again (and its sequence, though its first batches
  // may be lost before its publisher connects).
  warm_up(0);
  ASSERT_TRUE(eventually([&] { return worker_state(harness_, "l0")["kv_events"]["resets"].get<int>() >= 1; }, 10s))
      << worker_state(harness_, "l0").dump();
  auto after = send(history, "gate");
  EXPECT_EQ(after.cached, 0);
  EXPECT_EQ(after.predicted, after.cached);
}

// What the listener cannot place (a topic of no worker, another topic
// form) is counted and skipped; a worker's undecodable batch is counted as
// its decode error; routing and the real replica's events go on.
TEST_P(LlmdFleet, MessagesTheListenerCannotPlaceAreCountedAndSkipped) {
  start(1);
  void* context = zmq_ctx_new();
  void* publisher = zmq_socket(context, ZMQ_PUB);
  int linger = 0;
  zmq_setsockopt(publisher, ZMQ_LINGER, &linger, sizeof linger);
  ASSERT_EQ(zmq_connect(publisher, listener().c_str()), 0);
  auto publish = [&](const std::string& topic, std::uint64_t sequence, const std::string& payload) {
    unsigned char bytes[8];
    for (int at = 7; at >= 0; --at) {
      bytes[at] = static_cast<unsigned char>(sequence & 0xFF);
      sequence >>= 8;
    }
    zmq_send(publisher, topic.data(), topic.size(), ZMQ_SNDMORE);
    zmq_send(publisher, bytes, sizeof bytes, ZMQ_SNDMORE);
    zmq_send(publisher, payload.data(), payload.size(), 0);
  };
  // Until the connection is up, what a PUB sends is dropped: publish until
  // the gateway counts the first unmatched message.
  ASSERT_TRUE(eventually([&] {
    publish("kv@10.9.9.9:8000@sim-model", 1, "\x93");
    return metric_value(get(harness_.admin_port(), "/metrics").body, "kvgate_kv_events_unmatched_total") > 0;
  }));
  const auto before = metric_value(get(harness_.admin_port(), "/metrics").body, "kvgate_kv_events_unmatched_total");
  publish("kv-events", 1, "\x93");
  publish("", 1, "\x93");
  EXPECT_TRUE(eventually([&] {
    return metric_value(get(harness_.admin_port(), "/metrics").body, "kvgate_kv_events_unmatched_total") >= before + 2;
  }));
  // A message under the worker's topic without its sequence frame.
  const std::string topic = "kv@" + sims_[0]->address() + "@sim-model";
  zmq_send(publisher, topic.data(), topic.size(), ZMQ_SNDMORE);
  zmq_send(publisher, "\xc1\xc1", 2, 0);
  EXPECT_TRUE(eventually([&] { return worker_state(harness_, "l0")["kv_events"]["decode_errors"].get<int>() >= 1; }));
  zmq_close(publisher);
  zmq_ctx_term(context);

  auto history = json::array(
      {{{"role", "system"}, {"content", kSystem}}, {{"role", "user"}, {"content", "Which drill bit for tiles?"}}});
  auto first = send(history, "tiles");
  EXPECT_EQ(first.worker, "l0");
  std::this_thread::sleep_for(1200ms);
  auto second = send(history, "tiles");
  EXPECT_GT(second.cached, 0);
  EXPECT_EQ(second.predicted, second.cached);
}

INSTANTIATE_TEST_SUITE_P(EventForms, LlmdFleet, ::testing::Values(false, true),
                         [](const auto& info) { return info.param ? std::string("map") : std::string("array"); });

}  // namespace
}  // namespace kvgate::testing
