// kvgate in front of each engine's wire formats (kvgate-sim
// --engine-profile vllm|sglang|llamacpp): what the engine streams reaches
// the client whole, its cache hit is read from wherever that engine puts
// it, a refused prompt is not credited, the first token is timed; and a
// llama.cpp fleet (whole prompts in slots, no KV events) is predicted as it
// really caches.
#include <gtest/gtest.h>

#include <cstdlib>

#include <array>
#include <atomic>
#include <fstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "support/admin.hpp"
#include "support/fleet.hpp"

namespace kvgate::testing {
namespace {

using nlohmann::json;
using namespace std::chrono_literals;

std::string worker_yaml(const std::string& id, const std::string& url, const std::string& profile) {
  std::string yaml = "      - id: \"" + id + "\"\n        url: \"" + url + "\"\n        engine: " + profile + "\n";
  if (profile == "llamacpp") {
    yaml += "        slots: 2\n        cache_ram_mib: 0\n";  // the sims' --cache-ram
  }
  return yaml;
}

// Every event's shape, with what differs between two runs (ids, timings'
// figures) left out: the keys at each level and the delta's content.
json shape(const std::string& event) {
  if (event == "[DONE]") {
    return event;
  }
  auto parsed = json::parse(event);
  json result = json::object();
  for (auto& [key, value] : parsed.items()) {
    result[key] = value.is_object() ? json(json::array()) : json(value.type_name());
    if (value.is_object()) {
      for (auto& [inner, unused] : value.items()) {
        result[key].push_back(inner);
      }
    }
  }
  if (parsed.contains("choices") && !parsed["choices"].empty()) {
    result["choice"] = parsed["choices"][0];
  }
  return result;
}

std::vector<std::string> read_stream(int port, const json& body) {
  EventStream stream(port, "/v1/chat/completions", body.dump());
  EXPECT_EQ(stream.status(), 200);
  return stream.until_done();
}

class EngineProfiles : public ::testing::TestWithParam<std::string> {};

TEST_P(EngineProfiles, TheRelayKeepsWhatTheEngineSentAndReadsItsHitWhereverItIs) {
  const auto profile = GetParam();
  Harness harness;
  SimProcess sim(harness, {"--engine-profile", profile, "--max-model-len", "400", "--num-gpu-blocks", "4000"}, "r0");
  harness.start_gateway(
      "routing: {policy: cache_aware}\nmetrics_scrape: {interval: 200ms}\n",
      "models:\n  - name: \"sim-model\"\n    block_size: 16\n    workers:\n" + worker_yaml("r0", sim.url(), profile));
  auto body = chat_request(first_turn("Which screws hold a shelf bracket to drywall?"), 4);
  body["stream"] = true;
  const auto direct = read_stream(sim.port(), body);
  const auto relayed = read_stream(harness.api_port(), body);
  ASSERT_EQ(relayed.size(), direct.size());
  for (std::size_t index = 0; index < direct.size(); ++index) {
    EXPECT_EQ(shape(relayed[index]), shape(direct[index])) << profile << " event " << index;
  }
  if (profile == "llamacpp") {
    // llama.cpp's hit is only in `timings` (its last chunk): it must reach
    // the client, and the gateway reads it.
    ASSERT_GE(relayed.size(), 2u);
    EXPECT_TRUE(json::parse(relayed[relayed.size() - 2]).contains("timings"));
  }
  // The gateway asked the engine for usage; the client, which did not, gets
  // no usage chunk, yet the gateway counted the engine's figures.
  for (const auto& event : relayed) {
    EXPECT_EQ(event.find("\"usage\":{"), std::string::npos) << event;
  }
  ASSERT_TRUE(eventually([&] {
    return metric_value(harness, "kvgate_cached_prompt_tokens_total{model=\"sim-model\",worker=\"r0\"}") > 0;
  })) << "the engine's hit was not read from the "
      << profile << " stream";
  EXPECT_GE(metric_value(harness, "kvgate_time_to_first_token_seconds_count{model=\"sim-model\",worker=\"r0\"}"), 1);

  // Asked for, the usage chunk comes as the engine sends it.
  body["stream_options"] = {{"include_usage", true}};
  const auto with_usage = read_stream(harness.api_port(), body);
  ASSERT_GE(with_usage.size(), 2u);
  auto usage_chunk = json::parse(with_usage[with_usage.size() - 2]);
  EXPECT_TRUE(usage_chunk["choices"].empty());
  EXPECT_GT(usage_chunk["usage"]["prompt_tokens"].get<int>(), 0);
  EXPECT_EQ(usage_chunk.contains("timings"), profile == "llamacpp");

  // A prompt over the engine's context: its error body reaches the client
  // as the engine wrote it, and the prompt is not credited to the worker.
  std::string long_question;
  for (int word = 0; word < 500; ++word) {
    long_question += "word" + std::to_string(word) + " ";
  }
  auto refused = chat_request(json::array({{{"role", "user"}, {"content", long_question}}}), 4);
  const auto engine_answer = post_json(sim.port(), "/v1/chat/completions", refused.dump());
  const auto relayed_answer = post_json(harness.api_port(), "/v1/chat/completions", refused.dump());
  ASSERT_EQ(engine_answer.status, 400);
  EXPECT_EQ(relayed_answer.status, 400);
  EXPECT_EQ(relayed_answer.body, engine_answer.body);
  // The withdrawal follows the client's answer (the attempt ends after its
  // last byte went out), so the dry run may come first: wait for it.
  json route;
  EXPECT_TRUE(eventually([&] {
    route = json::parse(post_json(harness.admin_port(), "/debug/route", refused.dump()).body);
    return !route["candidates"].empty() && route["candidates"][0]["cached_tokens"] == 0;
  })) << route.dump();
  // The engine's own load metrics, whatever their names, feed the load signals.
  EXPECT_TRUE(eventually([&] {
    const auto engine = worker_state(harness, "r0")["engine"];
    return engine.is_object() && engine["running"].is_number() && engine["waiting"].is_number();
  })) << worker_state(harness, "r0").dump();
}

INSTANTIATE_TEST_SUITE_P(Engines, EngineProfiles, ::testing::Values("vllm", "sglang", "llamacpp"));

// The issue's llama.cpp fleet on sims that cache as llama-server does:
// three replicas with two slots, twelve conversations of five turns over
// three shared system prompts, all at once. kvgate models each replica's
// slots (cache_model: sequences) and must predict the engine's reported hit
// to the block on nine requests in ten.
TEST(LlamaCppFleet, PredictionsMatchTheSlotsAndLaterTurnsAreServedFromThem) {
  Harness harness;
  std::vector<std::unique_ptr<SimProcess>> sims;
  std::string workers;
  for (int index = 0; index < 3; ++index) {
    const auto id = "r" + std::to_string(index);
    sims.push_back(std::make_unique<SimProcess>(
        harness, std::vector<std::string>{"--engine-profile", "llamacpp", "--slots", "2", "--time-scale", "1"}, id));
    workers += worker_yaml(id, sims.back()->url(), "llamacpp");
  }
  const auto log = harness.folder() + "/decisions.jsonl";
  harness.start_gateway(
      "routing: {policy: cache_aware}\nmetrics_scrape: {interval: 200ms}\ndecision_log: \"" + log + "\"\n",
      "models:\n  - name: \"sim-model\"\n    block_size: 16\n    workers:\n" + workers);
  std::vector<std::string> systems;
  for (int family = 0; family < 3; ++family) {
    std::string text = "You are assistant number " + std::to_string(family) + " of the store.";
    for (int sentence = 0; sentence < 30; ++sentence) {
      text += " Rule " + std::to_string(family) + "." + std::to_string(sentence) +
              ": answer in full sentences and cite the aisle.";
    }
    systems.push_back(text);
  }
  std::atomic<int> failures{0};
  std::atomic<long> later_prompt{0};
  std::atomic<long> later_cached{0};
  std::vector<std::thread> clients;
  for (int session = 0; session < 12; ++session) {
    clients.emplace_back([&, session] {
      // Conversations start over the first second; each user reads the
      // answer for 100-400 ms before the next question (deterministic).
      std::this_thread::sleep_for(std::chrono::milliseconds(80 * session));
      json messages = json::array({{{"role", "system"}, {"content", systems[session % 3]}}});
      for (int turn = 0; turn < 5; ++turn) {
        messages.push_back({{"role", "user"},
                            {"content", "Conversation " + std::to_string(session) + ", question " +
                                            std::to_string(turn) + ": where are the hinges and the wood glue?"}});
        auto body = chat_request(messages, 16);
        auto response = post_json(harness.api_port(), "/v1/chat/completions", body.dump(),
                                  {{"x-session-id", "conversation-" + std::to_string(session)}});
        if (response.status != 200) {
          ++failures;
          return;
        }
        auto answer = json::parse(response.body);
        if (turn > 0) {
          later_prompt += answer["usage"]["prompt_tokens"].get<long>();
          later_cached += answer["timings"]["cache_n"].get<long>();
        }
        messages.push_back(answer["choices"][0]["message"]);
        std::this_thread::sleep_for(std::chrono::milliseconds(100 + (37 * (session + 3 * turn)) % 300));
      }
    });
  }
  for (auto& client : clients) {
    client.join();
  }
  ASSERT_EQ(failures.load(), 0);
  double exact = 0;
  double all = 0;
  for (const auto* worker : {"r0", "r1", "r2"}) {
    for (const auto* outcome : {"exact", "over", "under"}) {
      const auto count = metric_value(harness, std::string("kvgate_cache_predictions_total{outcome=\"") + outcome +
                                                   "\",worker=\"" + worker + "\"}");
      all += count;
      exact += std::string(outcome) == "exact" ? count : 0;
    }
  }
  const double later_share = static_cast<double>(later_cached) / static_cast<double>(later_prompt);
  RecordProperty("prediction_match", std::to_string(exact / all));
  RecordProperty("later_turn_cached_share", std::to_string(later_share));
  EXPECT_EQ(all, 60);
  EXPECT_GE(exact / all, 0.9) << exact << " of " << all << " predictions matched the engine";
  // The operator sees the model: every slot free again once all answers are in.
  auto state = worker_state(harness, "r0");
  EXPECT_EQ(state["engine_kind"], "llamacpp");
  EXPECT_EQ(state["cache_model"], "sequences");
  EXPECT_EQ(state["slots"]["total"], 2);
  EXPECT_TRUE(eventually([&] { return worker_state(harness, "r0")["slots"]["busy"] == 0; }))
      << worker_state(harness, "r0").dump();
  EXPECT_GT(state["index"]["gpu_blocks"].get<int>(), 0);
  // The decision log says the same, request by request.
  harness.gateway().stop();
  std::ifstream decisions(log);
  int logged = 0;
  int matched = 0;
  for (std::string line; std::getline(decisions, line);) {
    auto record = json::parse(line);
    const auto predicted = record["predicted_cached_tokens"].get<int>();
    const auto reported = record["cached_tokens"].get<int>();
    ++logged;
    // Within a block either way, as kvgate_cache_predictions_total counts
    // it: a prediction may count a slot's answer the sim does not reuse.
    matched += std::abs(reported - predicted) < 16 ? 1 : 0;
  }
  EXPECT_EQ(logged, 60);
  EXPECT_GE(matched, 54) << "of " << logged << " logged decisions";
  // 49-69% over eight runs here (two at once); 17% while a busy slot's
  // prompt was never credited (every request then looked cold everywhere
  // during bursts).
  EXPECT_GE(later_share, 0.35) << "later turns' prompt tokens served from the slots";
}

// admission.hold_slots on a one-slot llama.cpp replica: two conversations
// that each send their next turn as soon as they have an answer. Sent as
// they come, they take the slot from each other on every turn and compute
// their whole history each time. Once the gateway has learned that turns
// come back within a moment of their answers, it keeps a freed slot for
// its conversation's next turn: that turn leaves the queue ahead of the
// other conversation's waiting request and finds its history in the slot.
TEST(LlamaCppFleet, AFreedSlotIsKeptForItsConversationsNextTurn) {
  Harness harness;
  SimProcess sim(harness, {"--engine-profile", "llamacpp", "--slots", "1", "--time-scale", "0.25"}, "r0");
  const auto log = harness.folder() + "/decisions.jsonl";
  harness.start_gateway(
      "routing: {policy: cache_aware}\nadmission: {hold_slots: true, queue: {max_wait: 60s}}\n"
      "metrics_scrape: {interval: 200ms}\ndecision_log: \"" +
          log + "\"\n",
      "models:\n  - name: \"sim-model\"\n    block_size: 16\n    workers:\n"
      "      - {id: r0, url: \"" +
          sim.url() + "\", engine: llamacpp, slots: 1, cache_ram_mib: 0}\n");
  std::string manual;
  for (int rule = 0; rule < 120; ++rule) {
    manual += " Rule " + std::to_string(rule) + ": cite the aisle and the shelf of every part.";
  }
  constexpr int kTurns = 45;
  constexpr int kLateTurns = 5;
  std::atomic<int> failures{0};
  std::array<std::atomic<long>, 2> late_prompt{};
  std::array<std::atomic<long>, 2> late_cached{};
  std::vector<std::thread> clients;
  for (int session = 0; session < 2; ++session) {
    clients.emplace_back([&, session] {
      // Different from the first token: neither reuses the other's slot.
      json messages = json::array(
          {{{"role", "system"}, {"content", "Conversation " + std::to_string(session) + " of the store." + manual}}});
      for (int turn = 0; turn < kTurns; ++turn) {
        messages.push_back({{"role", "user"}, {"content", "Question " + std::to_string(turn) + ": which screws?"}});
        auto response = post_json(harness.api_port(), "/v1/chat/completions", chat_request(messages, 2).dump(),
                                  {{"x-session-id", "conversation-" + std::to_string(session)}});
        if (response.status != 200) {
          ++failures;
          return;
        }
        auto answer = json::parse(response.body);
        if (turn >= kTurns - kLateTurns) {
          late_prompt[session] += answer["usage"]["prompt_tokens"].get<long>();
          late_cached[session] += answer["timings"]["cache_n"].get<long>();
        }
        messages.push_back(answer["choices"][0]["message"]);
      }
    });
  }
  for (auto& client : clients) {
    client.join();
  }
  ASSERT_EQ(failures.load(), 0);
  for (int session = 0; session < 2; ++session) {
    const double share = static_cast<double>(late_cached[session]) / static_cast<double>(late_prompt[session]);
    EXPECT_GE(share, 0.9) << "conversation " << session << "'s last turns computed their history again";
  }
  const auto used = metric_value(harness, R"(kvgate_slot_holds_total{model="sim-model",outcome="used"})");
  EXPECT_GE(used, 2 * kLateTurns);
  EXPECT_GE(metric_value(harness, R"(kvgate_slot_holds_total{model="sim-model",outcome="kept"})"), used);
  // A turn of one conversation waited in the queue while the other kept
  // the slot for several turns: longer than any turn took at the worker.
  // The decision log tells that wait (dispatch_ms) from the worker's part of
  // the first token, which is all the router learns from.
  harness.gateway().stop();
  std::ifstream decisions(log);
  double longest_wait_ms = 0;
  double longest_at_worker_ms = 0;
  int records = 0;
  for (std::string line; std::getline(decisions, line); ++records) {
    const auto record = json::parse(line);
    const auto dispatch_ms = record["dispatch_ms"].get<double>();
    const auto ttft_ms = record["ttft_ms"].get<double>();
    EXPECT_LE(dispatch_ms, ttft_ms) << line;
    longest_wait_ms = std::max(longest_wait_ms, dispatch_ms);
    longest_at_worker_ms = std::max(longest_at_worker_ms, ttft_ms - dispatch_ms);
  }
  EXPECT_EQ(records, 2 * kTurns);
  EXPECT_GT(longest_wait_ms, longest_at_worker_ms) << "no turn waited for a kept slot";
}

// llama-server with its host-RAM prompt cache (--cache-ram): a
// conversation whose slot another took is saved there and restored on its
// next turn. kvgate credits it as the lower tier, priced by its load time.
TEST(LlamaCppFleet, AConversationOverwrittenInItsSlotIsServedFromHostRam) {
  Harness harness;
  SimProcess sim(harness, {"--engine-profile", "llamacpp", "--slots", "1", "--cache-ram", "64"}, "r0");
  harness.start_gateway("routing: {policy: cache_aware}\nmetrics_scrape: {interval: 200ms}\n",
                        "models:\n  - name: \"sim-model\"\n    block_size: 16\n    workers:\n"
                        "      - {id: r0, url: \"" +
                            sim.url() + "\", engine: llamacpp, slots: 1, cache_ram_mib: 64}\n");
  auto first = chat_request(first_turn("Which hinges fit a kitchen cabinet door of 18 mm?"), 8);
  auto answer = json::parse(post_json(harness.api_port(), "/v1/chat/completions", first.dump()).body);
  // Another conversation, nothing in common, takes the only slot.
  auto other = chat_request(json::array({{{"role", "system"}, {"content", "You translate recipes into French."}},
                                         {{"role", "user"}, {"content", "Two eggs, a cup of flour."}}}),
                            8);
  ASSERT_EQ(post_json(harness.api_port(), "/v1/chat/completions", other.dump()).status, 200);
  auto next = first;
  next["messages"].push_back(answer["choices"][0]["message"]);
  next["messages"].push_back({{"role", "user"}, {"content", "And the screws for them?"}});
  auto route = json::parse(post_json(harness.admin_port(), "/debug/route", next.dump()).body);
  const auto& candidate = route["candidates"][0];
  EXPECT_GT(candidate["offloaded_cached_tokens"].get<int>(), 0) << route.dump();
  EXPECT_GT(candidate["receive_ms"].get<double>(), 0) << route.dump();
  const auto predicted = route["predicted_cached_tokens"].get<int>();
  auto second = json::parse(post_json(harness.api_port(), "/v1/chat/completions", next.dump()).body);
  const auto reported = second["timings"]["cache_n"].get<int>();
  EXPECT_GT(reported, 0);
  // Within a block either way: the prediction also counts the answer the
  // slot generated (kvgate-sim's generated tokens are fillers the next
  // prompt does not repeat, so it reuses none of it).
  EXPECT_LT(std::abs(reported - predicted), 16) << "predicted " << predicted << ", the engine restored " << reported;
  EXPECT_GT(metric_value(harness, "kvgate_cache_predictions_total{outcome=\"exact\",worker=\"r0\"}"), 0);
}

}  // namespace
}  // namespace kvgate::testing
