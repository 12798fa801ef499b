// The router end to end: kvgate in front of real replica processes
// (kvgate-test-upstream, kvgate-sim with KV events over ZMQ). A dry run
// explains exactly what the next request gets; sessions say why they stay
// or move; the receipt header; prediction drift detected and acted on.
#include <gtest/gtest.h>

#include <csignal>
#include <fstream>
#include <map>
#include <random>
#include <regex>
#include <thread>

#include <nlohmann/json.hpp>

#include "kvgate/policy/prefill_rates.hpp"
#include "support/admin.hpp"
#include "support/fleet.hpp"

namespace kvgate::testing {
namespace {

using nlohmann::json;
using namespace std::chrono_literals;

std::map<std::string, std::string> parse_receipt(const std::string& receipt) {
  std::map<std::string, std::string> fields;
  static const std::regex kField(R"(([a-z_]+)=([^;]*)(; )?)");
  for (std::sregex_iterator at(receipt.begin(), receipt.end(), kField), end; at != end; ++at) {
    fields[(*at)[1]] = (*at)[2];
  }
  return fields;
}

const Headers kExplain{{"x-kvgate-explain", "1"}};

// For every policy, round robin included: a dry run followed by the same
// request (nothing else in between) names the worker that request gets.
TEST(Router, ADryRunNamesTheWorkerTheNextRequestGetsForEveryPolicy) {
  for (const char* policy : {"round_robin", "least_load", "session_hash", "prefix_hash", "cache_aware", "dynamo_cost",
                             "sglang_cache_aware"}) {
    SCOPED_TRACE(policy);
    Harness harness;
    harness.start_upstream("u0");
    harness.start_upstream("u1");
    harness.start_upstream("u2");
    harness.start_gateway(std::string("routing: {policy: ") + policy + "}\n", harness.models_for_upstreams());
    for (int request = 0; request < 7; ++request) {
      // Distinct prompts (nothing shared through the index) and a few
      // sessions, some without a key.
      auto content = "question " + std::to_string(request) + ": " + std::string(200, static_cast<char>('a' + request));
      json body = {
          {"model", "test-model"}, {"max_tokens", 4}, {"messages", {{{"role", "user"}, {"content", content}}}}};
      Headers headers;
      if (request % 3 != 0) {
        headers.emplace_back("x-session-id", "session-" + std::to_string(request % 2));
      }
      auto dry = post_json(harness.admin_port(), "/debug/route", body.dump(), headers);
      ASSERT_EQ(dry.status, 200) << dry.body;
      auto decision = json::parse(dry.body);
      headers.insert(headers.end(), kExplain.begin(), kExplain.end());
      auto real = post_json(harness.api_port(), "/v1/chat/completions", body.dump(), headers);
      ASSERT_EQ(real.status, 200) << real.body;
      EXPECT_EQ(real.header("x-kvgate-worker"), decision["worker"].get<std::string>()) << request << ": " << dry.body;
      auto receipt = parse_receipt(real.header("x-kvgate-route"));
      EXPECT_EQ(receipt["reason"], decision["reason"].get<std::string>()) << request;
      EXPECT_EQ(receipt["worker"], decision["worker"].get<std::string>());
    }
  }
}

// LoRA adapters stay where they are loaded: with one adapter slot per
// worker, an adapter's requests keep going to the worker that loaded it
// (resident: no load), and another adapter goes to the worker with a free
// slot rather than evicting the first; /debug/route says which is which.
TEST(Router, LoraAdaptersGoWhereTheyAreLoadedAndAvoidEvictingEachOther) {
  Fleet fleet;
  fleet.adapters = {"support-bot", "sql-bot"};
  // 2,000 model-ms per load at time scale 100: 20 ms, as configured below.
  const std::vector<std::string> lora{
      "--lora-adapters", "support-bot,sql-bot", "--max-loras", "1", "--lora-load-ms", "2000"};
  fleet.add_sim("s0", "map", true, lora);
  fleet.add_sim("s1", "map", true, lora);
  fleet.model_settings = "    max_loras: 1\n    lora_load: 20ms\n";
  fleet.start_gateway();
  int question = 0;
  auto request_for = [&](const std::string& adapter) {
    // Nothing shared between requests (no system prompt): only the
    // adapter's residency can keep them together.
    ++question;
    auto text = "Question " + std::to_string(question) + " about " + adapter + ": " +
                std::string(120, static_cast<char>('a' + question % 26));
    auto body = chat_request(json::array({{{"role", "user"}, {"content", text}}}), 4);
    body["model"] = adapter;
    return body;
  };
  auto send = [&](const json& body) {
    auto response = post_json(fleet.harness.api_port(), "/v1/chat/completions", body.dump());
    EXPECT_EQ(response.status, 200) << response.body;
    return response.header("x-kvgate-worker");
  };
  auto adapter_state = [](const json& route, const std::string& worker) {
    for (const auto& candidate : route["candidates"]) {
      if (candidate["worker"] == worker) {
        return candidate["adapter"].is_string() ? candidate["adapter"].get<std::string>() : std::string("base");
      }
    }
    return std::string("?");
  };
  const auto support_worker = send(request_for("support-bot"));
  const auto other = support_worker == "s0" ? std::string("s1") : std::string("s0");
  auto again = request_for("support-bot");
  auto route = fleet.route(again);
  EXPECT_EQ(adapter_state(route, support_worker), "resident");
  EXPECT_EQ(adapter_state(route, other), "loadable");
  EXPECT_EQ(route["worker"], support_worker);
  EXPECT_EQ(send(again), support_worker);
  auto sql = request_for("sql-bot");
  route = fleet.route(sql);
  EXPECT_EQ(adapter_state(route, support_worker), "evicts");
  EXPECT_EQ(adapter_state(route, other), "loadable");
  EXPECT_EQ(send(sql), other);
  for (int round = 0; round < 3; ++round) {
    EXPECT_EQ(send(request_for("support-bot")), support_worker);
    EXPECT_EQ(send(request_for("sql-bot")), other);
  }
  // A base-model request is not an adapter's.
  EXPECT_EQ(adapter_state(fleet.route(chat_request(first_turn("A base-model question"), 4)), "s0"), "base");
  // Each adapter was loaded once, on its own worker.
  double loads = 0;
  for (const char* id : {"s0", "s1"}) {
    const auto text = get(fleet.sim(id).port(), "/metrics").body;
    const auto at = text.find("\nkvgate_sim_lora_loads_total{");
    ASSERT_NE(at, std::string::npos);
    loads += std::stod(text.substr(text.find("} ", at) + 2));
  }
  EXPECT_EQ(loads, 2);
}

TEST(Router, TheReceiptIsOffByDefaultOnPerRequestAndOnForAllByConfig) {
  Harness harness;
  harness.start_upstream("u0");
  harness.start_upstream("u1");
  harness.start_gateway("routing: {policy: cache_aware}\n", harness.models_for_upstreams());
  EXPECT_EQ(post_json(harness.api_port(), "/v1/chat/completions", chat_body()).header("x-kvgate-route"), "");
  auto explained = post_json(harness.api_port(), "/v1/chat/completions", chat_body(), kExplain);
  // The documented grammar, and no prompt content.
  static const std::regex kGrammar(
      R"(worker=[^;= ]+; reason=[a-z_]+; predicted_cached=[0-9]+(; runner_up=[^;= ]+(; gap_ms=-?[0-9]+\.[0-9])?)?)");
  EXPECT_TRUE(std::regex_match(explained.header("x-kvgate-route"), kGrammar)) << explained.header("x-kvgate-route");
  EXPECT_EQ(parse_receipt(explained.header("x-kvgate-route"))["worker"], explained.header("x-kvgate-worker"));

  Harness always;
  always.start_upstream("u0");
  always.start_gateway("routing: {policy: round_robin, receipt: true}\n", always.models_for_upstreams());
  auto receipt = post_json(always.api_port(), "/v1/chat/completions", chat_body()).header("x-kvgate-route");
  EXPECT_EQ(parse_receipt(receipt)["reason"], "only_candidate") << receipt;
}

std::string turn_reason(const HttpResponse& response) {
  return parse_receipt(response.header("x-kvgate-route"))["reason"];
}

// A conversation through kvgate-sim replicas: its turns stay together while
// that pays, /debug/sessions shows each turn's prediction next to the
// engine's figure, and a turn whose worker went down says so.
TEST(Router, SessionsStayTogetherAndExplainTheirMoves) {
  Fleet fleet;
  fleet.add_sim("a");
  fleet.add_sim("b");
  fleet.start_gateway("", "", "health_check: {interval: 100ms, unhealthy_threshold: 1}\n");
  const Headers session{{"x-session-id", "conversation-1"}, {"x-kvgate-explain", "1"}};
  auto messages = first_turn("My bathroom fan rattles. Which part usually wears out?");
  auto first = post_json(fleet.harness.api_port(), "/v1/chat/completions", chat_request(messages).dump(), session);
  ASSERT_EQ(first.status, 200) << first.body;
  EXPECT_EQ(turn_reason(first), "new_session");
  const auto home = first.header("x-kvgate-worker");
  for (const char* question : {"And how do I reach it?", "Which screwdriver?", "Anything else to check?"}) {
    fleet.wait_synced(home);
    auto answer = json::parse(first.body)["choices"][0]["message"]["content"].get<std::string>();
    messages = second_turn(messages, answer, question);
    first = post_json(fleet.harness.api_port(), "/v1/chat/completions", chat_request(messages).dump(), session);
    ASSERT_EQ(first.status, 200);
    EXPECT_EQ(first.header("x-kvgate-worker"), home);
    EXPECT_EQ(turn_reason(first), "sticky") << first.header("x-kvgate-route");
  }

  // The gateway writes the engine's figures once the response has ended.
  json detail;
  for (int attempt = 0; attempt < 100; ++attempt) {
    detail = json::parse(get(fleet.harness.admin_port(), "/debug/sessions/conversation-1").body);
    if (detail["turns"].size() == 4 && !detail["turns"][3]["cached_tokens"].is_null()) {
      break;
    }
    std::this_thread::sleep_for(20ms);  // polling a remote process's state
  }
  EXPECT_EQ(detail["key"], "conversation-1");
  EXPECT_EQ(detail["worker"], home);
  ASSERT_EQ(detail["turns"].size(), 4u) << detail.dump();
  EXPECT_EQ(detail["turns"][0]["reason"], "new_session");
  for (std::size_t turn = 1; turn < 4; ++turn) {
    const auto& record = detail["turns"][turn];
    EXPECT_EQ(record["reason"], "sticky");
    EXPECT_GT(record["predicted_cached_tokens"].get<int>(), 0);
    EXPECT_EQ(record["predicted_cached_tokens"], record["cached_tokens"]) << record.dump();
    EXPECT_EQ(record["status"], 200);
    EXPECT_GE(record["ttft_ms"].get<double>(), 0.0);
  }
  auto metrics = get(fleet.harness.admin_port(), "/metrics").body;
  EXPECT_NE(metrics.find("kvgate_sessions_active 1"), std::string::npos);
  EXPECT_NE(metrics.find("kvgate_session_turn_hit_ratio_count{model=\"sim-model\"} 3"), std::string::npos) << metrics;

  // The session's worker goes down: the next turn moves, and says why.
  fleet.sim(home).stop();
  fleet.wait_until(home, [](const json& worker) { return worker["healthy"] == false; });
  messages = second_turn(messages, "ok", "Thanks, one last thing?");
  auto moved = post_json(fleet.harness.api_port(), "/v1/chat/completions", chat_request(messages).dump(), session);
  ASSERT_EQ(moved.status, 200) << moved.body;
  EXPECT_NE(moved.header("x-kvgate-worker"), home);
  EXPECT_EQ(turn_reason(moved), "moved_unhealthy");
  metrics = get(fleet.harness.admin_port(), "/metrics").body;
  EXPECT_NE(metrics.find("kvgate_session_moves_total{model=\"sim-model\",reason=\"moved_unhealthy\"} 1"),
            std::string::npos);
}

TEST(Router, UnknownOrMalformedSessionKeysAreClearErrors) {
  Harness harness;
  harness.start_upstream("u0");
  harness.start_gateway("", harness.models_for_upstreams());
  auto unknown = get(harness.admin_port(), "/debug/sessions/never-seen");
  EXPECT_EQ(unknown.status, 404);
  auto error = json::parse(unknown.body)["error"];
  EXPECT_EQ(error["code"], "session_not_found");
  EXPECT_EQ(error["message"].get<std::string>().find("never-seen"), std::string::npos);  // not echoed
  EXPECT_EQ(get(harness.admin_port(), "/debug/sessions/bad%zzescape").status, 400);
  EXPECT_EQ(post_json(harness.admin_port(), "/debug/sessions/x", "{}").status, 405);

  // A key with bytes that are not UTF-8 (headers may carry any byte) and a
  // key longer than the table keeps: stored, shown escaped, found again.
  const std::string odd_key = "caf\xe9-<script>";
  ASSERT_EQ(post_json(harness.api_port(), "/v1/chat/completions", chat_body(), {{"x-session-id", odd_key}}).status,
            200);
  auto odd = get(harness.admin_port(), "/debug/sessions/caf%E9-%3Cscript%3E");
  ASSERT_EQ(odd.status, 200) << odd.body;
  // The byte that is not UTF-8 comes back replaced, inside a JSON string.
  EXPECT_EQ(json::parse(odd.body)["key"], "caf\xef\xbf\xbd-<script>");
  const std::string long_key(4'000, 'k');
  ASSERT_EQ(post_json(harness.api_port(), "/v1/chat/completions", chat_body(), {{"x-session-id", long_key}}).status,
            200);
  auto stored = get(harness.admin_port(), "/debug/sessions/" + long_key);
  ASSERT_EQ(stored.status, 200);
  EXPECT_TRUE(json::parse(stored.body)["key"].get<std::string>().starts_with("xxh3:"));
}

// --- Agents ---

// Reads the decision log's records (the log is flushed on SIGHUP).
std::vector<json> decision_records(Harness& harness, const std::string& log, std::size_t at_least) {
  harness.gateway().send_signal(SIGHUP);
  std::vector<json> records;
  for (int attempt = 0; attempt < 100 && records.size() < at_least; ++attempt) {
    std::this_thread::sleep_for(20ms);  // the decision log is written by a background thread
    records.clear();
    std::ifstream file(log);
    for (std::string line; std::getline(file, line);) {
      records.push_back(json::parse(line));
    }
  }
  return records;
}

// Agent clients name their sessions in their own headers: with no
// configuration the gateway keys sessions by them, says which source gave
// each key, and each turn carries the seed's practical-test fields.
TEST(RouterAgents, AgentClientsSessionsAreRecognisedWithoutConfiguration) {
  Fleet fleet;
  fleet.add_sim("a");
  fleet.add_sim("b");
  auto log = fleet.harness.folder() + "/decisions.jsonl";
  fleet.start_gateway("decision_log: \"" + log + "\"\nmetrics_scrape: {interval: 100ms}\n");
  // KV usage comes from the engines' metrics: wait for a scrape of each.
  for (const char* id : {"a", "b"}) {
    fleet.wait_until(id, [](const json& worker) { return worker["engine"]["kv_usage"].is_number(); });
  }
  // Claude Code's header; an empty kvgate header falls through to it.
  const Headers claude{{"x-session-id", ""}, {"x-claude-code-session-id", "claude-7"}};
  auto messages = first_turn("List the files that define the router's cost model.");
  auto first = post_json(fleet.harness.api_port(), "/v1/chat/completions", chat_request(messages).dump(), claude);
  ASSERT_EQ(first.status, 200) << first.body;
  fleet.wait_synced(first.header("x-kvgate-worker"));
  auto answer = json::parse(first.body)["choices"][0]["message"]["content"].get<std::string>();
  messages = second_turn(messages, answer, "Now open the first one.");
  auto second = post_json(fleet.harness.api_port(), "/v1/chat/completions", chat_request(messages).dump(), claude);
  ASSERT_EQ(second.status, 200);
  // Codex's header, in both spellings, and OpenCode's.
  for (const auto& [header, key] : std::vector<std::pair<std::string, std::string>>{
           {"session-id", "codex-1"}, {"session_id", "codex-2"}, {"x-session-affinity", "opencode-1"}}) {
    ASSERT_EQ(post_json(fleet.harness.api_port(), "/v1/chat/completions",
                        chat_request(first_turn("Run the tests of " + key)).dump(), {{header, key}})
                  .status,
              200);
  }

  json detail;
  for (int attempt = 0; attempt < 100; ++attempt) {
    detail = json::parse(get(fleet.harness.admin_port(), "/debug/sessions/claude-7").body);
    if (detail["turns"].size() == 2 && !detail["turns"][1]["decode_ms"].is_null()) {
      break;
    }
    std::this_thread::sleep_for(20ms);  // the outcome is recorded once the response has ended
  }
  EXPECT_EQ(detail["key_source"], "header:x-claude-code-session-id") << detail.dump();
  ASSERT_EQ(detail["turns"].size(), 2u) << detail.dump();
  const auto& turn = detail["turns"][1];
  EXPECT_EQ(turn["worker"], second.header("x-kvgate-worker"));
  EXPECT_GT(turn["input_tokens"].get<int>(), 0);
  EXPECT_GT(turn["predicted_cached_tokens"].get<int>(), 0);
  EXPECT_EQ(turn["cached_tokens"], turn["predicted_cached_tokens"]) << turn.dump();
  EXPECT_GE(turn["ttft_ms"].get<double>(), 0.0);
  EXPECT_GE(turn["decode_ms"].get<double>(), 0.0);
  ASSERT_TRUE(turn["kv_usage"].is_number()) << turn.dump();
  EXPECT_GE(turn["kv_usage"].get<double>(), 0.0);
  EXPECT_LE(turn["kv_usage"].get<double>(), 1.0);

  // The list names every session with its source.
  auto listed = json::parse(get(fleet.harness.admin_port(), "/debug/sessions").body);
  std::map<std::string, std::string> sources;
  for (const auto& session : listed["sessions"]) {
    sources[session["key"]] = session["key_source"];
  }
  EXPECT_EQ(sources["claude-7"], "header:x-claude-code-session-id");
  EXPECT_EQ(sources["codex-1"], "header:session-id");
  EXPECT_EQ(sources["codex-2"], "header:session_id");
  EXPECT_EQ(sources["opencode-1"], "header:x-session-affinity");

  // The decision log carries the source and the chosen worker's KV usage.
  auto records = decision_records(fleet.harness, log, 5);
  ASSERT_GE(records.size(), 5u);
  std::size_t agent_records = 0;
  for (const auto& record : records) {
    if (record["session"] == "claude-7") {
      ++agent_records;
      EXPECT_EQ(record["session_source"], "header:x-claude-code-session-id");
      EXPECT_TRUE(record["kv_usage"].is_number()) << record.dump();
      EXPECT_GE(record["decode_ms"].get<double>(), 0.0);
    }
  }
  EXPECT_EQ(agent_records, 2u);
}

// A configured list replaces the default: sources it lacks are ignored, a
// body field of the operator's choosing is read, and a flood of distinct
// agent keys leaves the table and its listing bounded.
TEST(RouterAgents, ConfiguredSourcesAndAFloodOfKeysStayBounded) {
  Harness harness;
  harness.start_upstream("u0");
  harness.start_gateway(
      "sessions: {max_sessions: 32, key_from: [body:conversation, header:x-claude-code-session-id]}\n",
      harness.models_for_upstreams());
  auto body = json::parse(chat_body());
  body["conversation"] = "thread-9";
  ASSERT_EQ(post_json(harness.api_port(), "/v1/chat/completions", body.dump(), {{"x-session-id", "ignored"}}).status,
            200);
  auto thread = get(harness.admin_port(), "/debug/sessions/thread-9");
  ASSERT_EQ(thread.status, 200) << thread.body;
  EXPECT_EQ(json::parse(thread.body)["key_source"], "body:conversation");
  EXPECT_EQ(get(harness.admin_port(), "/debug/sessions/ignored").status, 404);

  for (int key = 0; key < 300; ++key) {
    ASSERT_EQ(post_json(harness.api_port(), "/v1/chat/completions", chat_body(),
                        {{"x-claude-code-session-id", "flood-" + std::to_string(key)}})
                  .status,
              200);
  }
  auto listed = json::parse(get(harness.admin_port(), "/debug/sessions?limit=100000").body);
  EXPECT_LE(listed["stored"].get<int>(), 32);
  EXPECT_LE(listed["sessions"].size(), 32u);
  EXPECT_GE(listed["sessions"].size(), 1u);
  EXPECT_EQ(json::parse(get(harness.admin_port(), "/debug/sessions?limit=2").body)["sessions"].size(), 2u);
  EXPECT_EQ(get(harness.admin_port(), "/debug/sessions?limit=0").status, 400);
  EXPECT_EQ(get(harness.admin_port(), "/debug/sessions?limit=lots").status, 400);
}

// A sub-agent forked with its parent's history, under a key of its own:
// the gateway links it to the parent from the prompts alone, and a session
// that shares only the preamble is nobody's child.
TEST(RouterAgents, AForkThatContinuesASessionsHistoryIsItsChild) {
  Harness harness;
  harness.start_upstream("u0");
  harness.start_upstream("u1");
  harness.start_gateway("", harness.models_for_upstreams());
  auto text = [](char fill, std::size_t bytes) { return std::string(bytes, fill); };
  auto completion = [&](const std::string& key, const std::string& prompt) {
    const json body = {{"model", "test-model"}, {"prompt", prompt}, {"max_tokens", 4}};
    auto response = post_json(harness.api_port(), "/v1/completions", body.dump(), {{"x-session-id", key}});
    EXPECT_EQ(response.status, 200) << response.body;
  };
  const auto preamble = "You are a coding agent. " + text('p', 1'500);
  const auto first = preamble + "Task: fix the flaky test. " + text('a', 1'000);
  const auto history = first + " Found it in the retry loop. " + text('b', 2'500);
  completion("lead", first);
  completion("lead", history);
  completion("other-user", preamble + "Task: write docs. " + text('o', 3'000));
  completion("helper", history + " Sub-task: read the retry loop. " + text('h', 800));

  auto helper = json::parse(get(harness.admin_port(), "/debug/sessions/helper").body);
  EXPECT_EQ(helper["parent"], "lead") << helper.dump();
  auto lead = json::parse(get(harness.admin_port(), "/debug/sessions/lead").body);
  EXPECT_TRUE(lead["parent"].is_null());
  EXPECT_EQ(lead["children"], 1);
  EXPECT_TRUE(json::parse(get(harness.admin_port(), "/debug/sessions/other-user").body)["parent"].is_null());
  bool listed = false;
  const auto list = json::parse(get(harness.admin_port(), "/debug/sessions").body);
  for (const auto& session : list["sessions"]) {
    listed = listed || (session["key"] == "helper" && session["parent"] == "lead");
  }
  EXPECT_TRUE(listed) << list.dump();
}

// --- Prediction drift ---

// Sessions whose prompts grow turn by turn, sent round-robin over the
// sessions (each turn a completions request extending the session's text).
class GrowingSessions {
 public:
  GrowingSessions(int sessions, int chars_per_turn) : chars_per_turn_(chars_per_turn) {
    for (int session = 0; session < sessions; ++session) {
      texts_.push_back("session " + std::to_string(session) + " " +
                       std::string(static_cast<std::size_t>(chars_per_turn), static_cast<char>('a' + session % 26)));
    }
  }
  // The next request body, for session (count % sessions).
  json next(const std::string& model) {
    auto& text = texts_[count_ % texts_.size()];
    text += " turn " + std::to_string(count_) +
            std::string(static_cast<std::size_t>(chars_per_turn_ + static_cast<int>(count_ % 7) * 3), 'x');
    ++count_;
    return {{"model", model}, {"prompt", text}, {"max_tokens", 1}};
  }
  void reset_texts() {
    for (std::size_t session = 0; session < texts_.size(); ++session) {
      texts_[session] = "round two " + std::to_string(session) + std::string(64, 'r');
    }
  }

 private:
  int chars_per_turn_;
  std::size_t count_ = 0;
  std::vector<std::string> texts_;
};

// A worker without events whose configured KV capacity is far above the
// engine's real one: the gateway keeps predicting prefixes the engine has
// long evicted. Within a bounded number of requests the worker is marked
// drifting, its index stops being credited, and the other (healthy) worker
// never trips.
TEST(RouterDrift, AConfiguredCapacityFarAboveTheEnginesIsDetectedAndRoutingFallsBack) {
  Harness harness;
  SimProcess small(harness, {"--num-gpu-blocks", "40", "--max-model-len", "512"}, "small");
  SimProcess large(harness, {"--num-gpu-blocks", "100000"}, "large");
  harness.start_gateway("routing: {policy: cache_aware}\nmetrics_scrape: {enabled: false}\n",
                        "models:\n  - name: \"sim-model\"\n    block_size: 16\n    workers:\n"
                        "      - id: \"misconfigured\"\n        url: \"" +
                            small.url() +
                            "\"\n        kv_capacity_blocks: 1000000\n"
                            "      - id: \"right\"\n        url: \"" +
                            large.url() + "\"\n        kv_capacity_blocks: 100000\n");
  // Each turn adds ~100 tokens; 8 sessions of up to ~330 tokens against an
  // engine that holds 640.
  GrowingSessions sessions(8, 400);
  int requests = 0;
  for (; requests < 120 && worker_state(harness, "misconfigured")["drifting"] != true; ++requests) {
    auto response = post_json(harness.api_port(), "/v1/completions", sessions.next("sim-model").dump());
    ASSERT_EQ(response.status, 200) << response.body;
    if (requests % 24 == 23) {
      sessions.reset_texts();  // within the engines' 512-token limit
    }
  }
  auto state = worker_state(harness, "misconfigured");
  ASSERT_EQ(state["drifting"], true) << "not detected within " << requests << " requests: " << state.dump();
  RecordProperty("requests_until_detected", requests);
  EXPECT_GE(state["predictions"]["over_predicted"].get<int>(), 8);
  EXPECT_EQ(worker_state(harness, "right")["drifting"], false);
  auto metrics = get(harness.admin_port(), "/metrics").body;
  EXPECT_NE(metrics.find("kvgate_index_drifting{worker=\"misconfigured\"} 1"), std::string::npos);
  EXPECT_NE(metrics.find("kvgate_index_drifting{worker=\"right\"} 0"), std::string::npos);
  // The fallback: the drifting worker is scored as if it held nothing.
  auto route = json::parse(post_json(harness.admin_port(), "/debug/route", sessions.next("sim-model").dump()).body);
  for (const auto& candidate : route["candidates"]) {
    if (candidate["worker"] == "misconfigured") {
      EXPECT_EQ(candidate["drifting"], true);
      EXPECT_EQ(candidate["cached_tokens"], 0);
    }
  }
  // The evidence was logged once.
  harness.gateway().stop();
  auto log = harness.gateway().stderr_text();
  EXPECT_NE(log.find("worker misconfigured: cache predictions drifting"), std::string::npos);
}

// A replica whose KV block size (64) is not the configured one (16): the
// gateway predicts hits at 16-token granularity that the engine cannot
// give. Detected within a bounded number of requests.
TEST(RouterDrift, ABlockSizeThatDiffersFromTheEnginesIsDetected) {
  Harness harness;
  SimProcess sim(harness, {"--block-size", "64"}, "sim64");
  harness.start_gateway("routing: {policy: cache_aware}\n",
                        "models:\n  - name: \"sim-model\"\n    block_size: 16\n    workers:\n"
                        "      - id: \"a\"\n        url: \"" +
                            sim.url() + "\"\n");
  GrowingSessions sessions(4, 30);
  int requests = 0;
  for (; requests < 80 && worker_state(harness, "a")["drifting"] != true; ++requests) {
    ASSERT_EQ(post_json(harness.api_port(), "/v1/completions", sessions.next("sim-model").dump()).status, 200);
  }
  EXPECT_EQ(worker_state(harness, "a")["drifting"], true) << worker_state(harness, "a").dump();
  RecordProperty("requests_until_detected", requests);
}

// Two replicas with KV events and `blocks` KV blocks each (512-token
// prompts at most), a gateway in front: sessions soon evict each other.
void start_two_small_replicas(Fleet& fleet, int blocks) {
  for (const char* id : {"a", "b"}) {
    fleet.add_sim(id, "map", true, {"--num-gpu-blocks", std::to_string(blocks), "--max-model-len", "512"});
  }
  fleet.start_gateway();
}

// Replicas with KV events under heavy KV pressure (sessions evicting each
// other): predictions stay right, nothing drifts.
TEST(RouterDrift, AHealthyFleetUnderKvPressureNeverTrips) {
  Fleet fleet;
  start_two_small_replicas(fleet, 48);
  // ~2,600 prompt tokens of live sessions against 2 x 768 cached.
  GrowingSessions sessions(8, 400);
  for (int request = 0; request < 96; ++request) {
    // Each turn is sent twice in a row: whatever the pressure evicts
    // between turns, the repeat is a hit the index must predict, so the
    // check below always has samples to judge.
    auto body = sessions.next("sim-model").dump();
    for (int copy = 0; copy < 2; ++copy) {
      ASSERT_EQ(post_json(fleet.harness.api_port(), "/v1/completions", body).status, 200);
    }
    if (request % 24 == 23) {
      sessions.reset_texts();
    }
  }
  auto metrics = get(fleet.harness.admin_port(), "/metrics").body;
  int samples = 0;
  for (const auto* id : {"a", "b"}) {
    auto state = fleet.worker(id);
    EXPECT_EQ(state["drifting"], false) << state.dump();
    samples += state["predictions"]["samples"].get<int>();
  }
  EXPECT_GT(samples, 0);
  EXPECT_EQ(metrics.find("kvgate_index_drifting{worker=\"a\"} 1"), std::string::npos);
}

// The sim's time to first token for a lone cold prompt (bench/sim engine):
// one step per chunk of at most `chunk` tokens, each costing the step
// overhead, the chunk's prefill and a read of the context so far; the
// first token comes with the last chunk. In real milliseconds.
struct SimTiming {
  double overhead_ms = 6;
  double prefill_ms_per_token = 0.027;
  double attention_ms_per_context_token = 0.00004;
  std::uint32_t chunk = 8192;
  double time_scale = 1;

  [[nodiscard]] double cold_ttft_ms(std::uint32_t tokens) const {
    double total = 0;
    for (std::uint32_t computed = 0; computed < tokens; computed += chunk) {
      const auto step = std::min(chunk, tokens - computed);
      total += overhead_ms + prefill_ms_per_token * step + attention_ms_per_context_token * (computed + step);
    }
    return total / time_scale;
  }

  [[nodiscard]] std::vector<std::string> flags() const {
    return {"--time-scale",
            std::to_string(time_scale),
            "--step-overhead-ms",
            std::to_string(overhead_ms),
            "--prefill-ms-per-token",
            std::to_string(prefill_ms_per_token),
            "--attention-ms-per-context-token",
            std::to_string(attention_ms_per_context_token),
            "--max-num-batched-tokens",
            std::to_string(chunk)};
  }
};

// Three replicas that differ only in speed: one as the defaults, one twice
// as slow, one whose attention dominates long prompts (chunked at 512
// tokens, each chunk reading the context so far: a cost that grows with
// the square of the prompt). Streamed cold
// prompts of 256-4,096 tokens, spread by round robin, teach the gateway
// each one's prefill cost; cache_aware then sends a cold prompt to the
// fastest and prices the others by what they learned.
// The learned costs include the gateway's and the sims' own processing
// time, which the sanitizer build multiplies, so the assertions are on what
// tells the replicas apart (ratios with margins); how close each learned
// cost comes to the sim's arithmetic is recorded (learned_vs_sim_*), and
// the fit's accuracy itself is asserted on synthetic engines (PrefillFit).
TEST(RouterLearning, EachWorkerLearnsItsOwnPrefillCostAndThePolicyFollowsIt) {
  Harness harness;
  const SimTiming fast{6, 0.027, 0.00004, 1'024, 2};
  const SimTiming slow{12, 0.054, 0.00008, 1'024, 2};
  const SimTiming attention{6, 0.027, 0.02, 512, 2};
  std::map<std::string, SimTiming> timings{{"fast", fast}, {"slow", slow}, {"attention", attention}};
  std::vector<std::unique_ptr<SimProcess>> sims;
  std::string models = "models:\n  - name: \"sim-model\"\n    block_size: 16\n    workers:\n";
  for (const auto& [id, timing] : timings) {
    sims.push_back(std::make_unique<SimProcess>(harness, timing.flags(), id));
    models += "      - id: \"" + id + "\"\n        url: \"" + sims.back()->url() + "\"\n";
  }
  const std::string settings = "metrics_scrape: {enabled: false}\n";
  harness.start_gateway("routing: {policy: round_robin}\n" + settings, models);
  std::mt19937 random(17);
  std::uniform_int_distribution<std::uint32_t> length(256, 4'096);
  for (int request = 0; request < 150; ++request) {
    // Distinct text from the first byte: nothing cached anywhere.
    const auto tokens = length(random);
    std::string prompt = std::to_string(request) + ":";
    prompt.resize(tokens * 4, static_cast<char>('a' + request % 26));
    EventStream stream(harness.api_port(), "/v1/completions",
                       json{{"model", "sim-model"}, {"prompt", prompt}, {"max_tokens", 1}, {"stream", true}}.dump());
    ASSERT_EQ(stream.status(), 200);
    stream.rest();
  }
  ASSERT_TRUE(eventually([&] { return worker_state(harness, "slow")["prefill_cost"]["samples"] == 50; }))
      << worker_state(harness, "slow").dump();
  std::map<std::string, policy::PrefillRates> learned;
  for (const auto& [id, timing] : timings) {
    const auto cost = worker_state(harness, id)["prefill_cost"];
    learned[id] = {cost["ms_per_token"].get<double>(), cost["ms_per_token_pair"].get<double>(),
                   cost["base_ms"].get<double>(), cost["samples"].get<std::uint64_t>()};
    for (std::uint32_t tokens : {2'048u, 4'096u}) {
      RecordProperty("learned_vs_sim_" + id + "_" + std::to_string(tokens),
                     std::to_string(learned[id].prefill_ms(tokens, 0) / timing.cold_ttft_ms(tokens)));
    }
  }
  // Sim arithmetic at 4,096 tokens: fast 67 ms, slow 135 ms, attention 264 ms.
  const double slow_over_fast = learned["slow"].prefill_ms(4'096, 0) / learned["fast"].prefill_ms(4'096, 0);
  EXPECT_GT(slow_over_fast, 1.4);
  EXPECT_LT(slow_over_fast, 2.6);
  EXPECT_GT(learned["attention"].ms_per_token_pair, 3 * learned["fast"].ms_per_token_pair + 1e-6)
      << "the attention term is what sets that replica apart";
  EXPECT_GT(learned["attention"].prefill_ms(4'096, 0), 1.5 * learned["slow"].prefill_ms(4'096, 0));
  auto metrics = get(harness.admin_port(), "/metrics").body;
  EXPECT_NE(metrics.find("kvgate_worker_prefill_fit_samples{worker=\"fast\"} 50"), std::string::npos);

  // What was learned survives a reload (the workers did not change).
  harness.write_config("routing: {policy: cache_aware}\n" + settings, models);
  harness.gateway().send_signal(SIGHUP);
  ASSERT_TRUE(eventually(
      [&] { return json::parse(get(harness.admin_port(), "/debug/workers").body)["policy"] == "cache_aware"; }));
  EXPECT_EQ(worker_state(harness, "fast")["prefill_cost"]["samples"], 50);
  std::string cold(4'096 * 4, 'z');
  auto route = json::parse(post_json(harness.admin_port(), "/debug/route",
                                     json{{"model", "sim-model"}, {"prompt", cold}, {"max_tokens", 1}}.dump())
                               .body);
  EXPECT_EQ(route["worker"], "fast") << route.dump();
  std::map<std::string, double> prefill;
  for (const auto& candidate : route["candidates"]) {
    prefill[candidate["worker"].get<std::string>()] = candidate["prefill_ms"].get<double>();
  }
  EXPECT_GT(prefill["slow"] / prefill["fast"], 1.4) << route.dump();
  EXPECT_GT(prefill["attention"], prefill["slow"]) << route.dump();
}

// Replicas whose KV memory is full, traffic with session keys: the gateway
// learns how its conversations come back (the gaps between their turns),
// each worker's blocks by idle age come from its KV events, and a decision
// shows per candidate what placing the request there would evict and the
// re-prefill that is expected to cost (policy/eviction.hpp prices it; the
// unit tests check the arithmetic).
TEST(RouterEviction, FullReplicasShowWhatEachPlacementWouldEvict) {
  Fleet fleet;
  start_two_small_replicas(fleet, 64);
  // 8 conversations of 6 turns growing to ~330 tokens each: ~170 blocks of
  // live prefixes against 2 x 64.
  GrowingSessions sessions(8, 200);
  for (int request = 0; request < 48; ++request) {
    const Headers key{{"x-session-id", "conversation-" + std::to_string(request % 8)}};
    ASSERT_EQ(post_json(fleet.harness.api_port(), "/v1/completions", sessions.next("sim-model").dump(), key).status,
              200);
  }
  // The ingestion thread publishes each worker's blocks every 100 ms, and
  // each worker's capacity comes with its scrape: both replicas are waited
  // for. The count and the age profile are read one after the other: a
  // read between two of the writer's publications may see them differ.
  for (const std::string worker : {"a", "b"}) {
    json full;
    int aged = 0;
    for (int attempt = 0; attempt < 200; ++attempt) {
      full = fleet.worker(worker)["index"];
      aged = 0;
      for (const auto& bucket : full["gpu_blocks_by_idle_age"]) {
        aged += bucket["count"].get<int>();
      }
      if (full["capacity_blocks"] == 64 && full["gpu_blocks"].get<int>() >= 48 && aged == full["gpu_blocks"]) {
        break;
      }
      std::this_thread::sleep_for(20ms);  // polling a remote process's state
    }
    ASSERT_EQ(full["capacity_blocks"], 64) << worker << " " << full.dump();
    ASSERT_GE(full["gpu_blocks"].get<int>(), 48) << worker << " " << full.dump();
    EXPECT_EQ(aged, full["gpu_blocks"].get<int>()) << worker << " " << full.dump();
  }

  // A new conversation of ~25 blocks (about 4 bytes a token): more than
  // the 16 a replica holding 48 of 64 has free.
  json body = {{"model", "sim-model"}, {"prompt", "a new conversation " + std::string(1600, 'n')}, {"max_tokens", 1}};
  auto route = json::parse(
      post_json(fleet.harness.admin_port(), "/debug/route", body.dump(), {{"x-session-id", "newcomer"}}).body);
  EXPECT_EQ(route["returns"]["learned"], true) << route.dump();
  EXPECT_EQ(route["returns"]["turns"], 48);
  EXPECT_EQ(route["returns"]["sessions"], 8);
  EXPECT_NEAR(route["returns"]["continuation"].get<double>(), 40.0 / 48, 1e-9);
  for (const auto& candidate : route["candidates"]) {
    ASSERT_TRUE(candidate["evicts_ms"].is_number()) << candidate.dump();
    EXPECT_GE(candidate["evicts_ms"].get<double>(), 0) << candidate.dump();
    EXPECT_GT(candidate["evicted_blocks"].get<int>(), 0) << candidate.dump();
    EXPECT_GT(candidate["indexed_blocks"].get<int>(), 0) << candidate.dump();
  }
}

// routing.cache_aware.congestion_cost through the gateway: the router
// counts what it sends each worker (/debug/workers traffic), and with the
// option a decision charges every candidate's prefill what it delays the
// fleet's next requests (/debug/route congestion_ms; policy/congestion.hpp
// has the arithmetic, the unit tests check it). A gateway without the
// option in front of the same replicas prices none.
TEST(RouterCongestion, TheTrafficSentIsCountedAndEachCandidateIsChargedItsCongestion) {
  Fleet fleet;
  fleet.add_sim("a");
  fleet.add_sim("b");
  fleet.harness.start_gateway(
      "routing: {policy: cache_aware, cache_aware: {congestion_cost: true}}\nhealth_check: {interval: 200ms}\n",
      fleet.models_yaml());
  fleet.warm_up("a");
  fleet.warm_up("b");
  for (int request = 0; request < 16; ++request) {
    const auto body = json{{"model", "sim-model"},
                           {"prompt", "request " + std::to_string(request) + " " + std::string(400, 'x')},
                           {"max_tokens", 1}};
    ASSERT_EQ(post_json(fleet.harness.api_port(), "/v1/completions", body.dump()).status, 200);
  }
  double requests_per_s = 0;
  double utilisation = 0;
  for (const std::string worker : {"a", "b"}) {
    const auto traffic = fleet.worker(worker)["traffic"];
    ASSERT_TRUE(traffic["requests_per_s"].is_number()) << traffic.dump();
    requests_per_s += traffic["requests_per_s"].get<double>();
    utilisation += traffic["prefill_utilisation"].get<double>();
  }
  EXPECT_GT(requests_per_s, 0);
  EXPECT_GT(utilisation, 0);
  const auto body = json{{"model", "sim-model"}, {"prompt", "one more " + std::string(400, 'y')}, {"max_tokens", 1}};
  auto route = json::parse(post_json(fleet.harness.admin_port(), "/debug/route", body.dump()).body);
  ASSERT_EQ(route["candidates"].size(), 2u) << route.dump();
  for (const auto& candidate : route["candidates"]) {
    ASSERT_TRUE(candidate["congestion_ms"].is_number()) << candidate.dump();
    EXPECT_GT(candidate["congestion_ms"].get<double>(), 0) << candidate.dump();
    // In the score, not in the expected first token.
    EXPECT_GE(candidate["score"].get<double>(),
              candidate["expected_ttft_ms"].get<double>() + candidate["congestion_ms"].get<double>() - 1e-6)
        << candidate.dump();
  }
  Harness plain;
  fleet.start_another_gateway(plain);
  auto unpriced = json::parse(post_json(plain.admin_port(), "/debug/route", body.dump()).body);
  for (const auto& candidate : unpriced["candidates"]) {
    EXPECT_TRUE(candidate["congestion_ms"].is_null()) << candidate.dump();
  }
}

// A replica with a CPU tier (kvgate-sim --cpu-offload-blocks): a prompt its
// GPU evicted is still held, one tier down. The index follows the engine's
// events for both tiers; the decision credits the prompt as cached and
// prices loading it back (receive_ms) instead of its prefill, and the
// engine reports it cached.
TEST(RouterTiers, APromptEvictedToTheCpuTierIsPricedByItsLoadTime) {
  Fleet fleet;
  fleet.add_sim("a", "map", true, {"--num-gpu-blocks", "40", "--max-model-len", "512", "--cpu-offload-blocks", "400"});
  fleet.start_gateway();
  auto prompt = [](char letter) {
    return json{{"model", "sim-model"}, {"prompt", std::string(1'100, letter)}, {"max_tokens", 1}};
  };
  ASSERT_EQ(post_json(fleet.harness.api_port(), "/v1/completions", prompt('a').dump()).status, 200);
  // Two other prompts of the same size take the GPU's 40 blocks.
  for (char other : {'b', 'c'}) {
    ASSERT_EQ(post_json(fleet.harness.api_port(), "/v1/completions", prompt(other).dump()).status, 200);
  }
  json candidate;
  for (int attempt = 0; attempt < 200; ++attempt) {
    auto route = json::parse(post_json(fleet.harness.admin_port(), "/debug/route", prompt('a').dump()).body);
    candidate = route["candidates"][0];
    if (candidate["offloaded_cached_tokens"].get<int>() > 0) {
      break;
    }
    std::this_thread::sleep_for(20ms);  // the events travel to the index asynchronously
  }
  ASSERT_GT(candidate["offloaded_cached_tokens"].get<int>(), 0) << candidate.dump();
  EXPECT_GT(candidate["cached_tokens"].get<int>(), 0);
  EXPECT_GT(candidate["receive_ms"].get<double>(), 0);
  // Defaults: 128 KiB per token over 25 GB/s.
  EXPECT_NEAR(candidate["receive_ms"].get<double>(),
              candidate["offloaded_cached_tokens"].get<double>() * 131'072 / 25e6, 1e-9);
  auto response = post_json(fleet.harness.api_port(), "/v1/completions", prompt('a').dump());
  ASSERT_EQ(response.status, 200);
  const auto cached = json::parse(response.body)["usage"]["prompt_tokens_details"]["cached_tokens"].get<int>();
  EXPECT_EQ(cached, candidate["cached_tokens"].get<int>()) << response.body;
}

}  // namespace
}  // namespace kvgate::testing
