// The endpoint picker behind a real Envoy: deploy/envoy/envoy.yaml as
// shipped (its ports changed), Envoy's ext_proc filter asking kvgate for
// each request, its ORIGINAL_DST cluster connecting to the pick, the
// response streaming back through the picker. Clients speak plain HTTP to
// Envoy, as an OpenAI SDK would; kvgate-sim and kvgate-test-upstream are the
// replicas.
#include <gtest/gtest.h>

#include <csignal>
#include <fstream>
#include <set>
#include <thread>

#include <nlohmann/json.hpp>

#include "support/admin.hpp"
#include "support/envoy_process.hpp"
#include "support/fleet.hpp"

namespace kvgate::testing {
namespace {

using nlohmann::json;
using namespace std::chrono_literals;

// The OpenAI error a client got: {"error": {"code": ...}}; "" when the body
// is not one.
std::string error_code(const HttpResponse& response) {
  auto body = json::parse(response.body, nullptr, false);
  if (!body.is_object() || !body["error"].is_object()) {
    return "";
  }
  const auto& code = body["error"]["code"];
  return code.is_string() ? code.get<std::string>() : "";
}

// A gateway whose picker Envoy asks, in front of kvgate-sim replicas.
class EnvoyFleet : public ::testing::Test {
 protected:
  void start(const std::string& settings = "", int sims = 3) {
    for (int at = 0; at < sims; ++at) {
      ids_.push_back("s" + std::to_string(at));
      fleet_.add_sim(ids_.back());
    }
    decisions_ = fleet_.harness.folder() + "/decisions.jsonl";
    fleet_.start_gateway("epp_listen: \"127.0.0.1:0\"\ndecision_log: \"" + decisions_ + "\"\n" + settings);
    ASSERT_NE(fleet_.harness.epp_port(), 0);
    envoy_ = std::make_unique<EnvoyProcess>(fleet_.harness, fleet_.harness.epp_port());
  }

  HttpResponse chat_through_envoy(const json& body, const Headers& headers = {}) {
    return post_json(envoy_->port(), "/v1/chat/completions", body.dump(), headers);
  }

  Fleet fleet_;
  std::vector<std::string> ids_;
  std::string decisions_;
  std::unique_ptr<EnvoyProcess> envoy_;
};

// For every policy, round robin included: the replica that answers through
// Envoy (kvgate-test-upstream names itself) is the one a dry run just
// before names. The client has its answer a moment before the picker sees
// the response end (Envoy sends it both at once), so each dry run waits
// for the previous request to leave the workers' load, which the load
// policies read.
TEST(Envoy, ForEveryPolicyEnvoySendsTheRequestWhereTheDryRunSays) {
  for (const char* policy : {"round_robin", "least_load", "session_hash", "prefix_hash", "cache_aware", "dynamo_cost",
                             "sglang_cache_aware"}) {
    SCOPED_TRACE(policy);
    Harness harness;
    for (const char* id : {"u0", "u1", "u2"}) {
      harness.start_upstream(id);
    }
    harness.start_gateway(std::string("routing: {policy: ") + policy + "}\nepp_listen: \"127.0.0.1:0\"\n",
                          harness.models_for_upstreams());
    EnvoyProcess envoy(harness, harness.epp_port());
    std::set<std::string> served;
    for (int request = 0; request < 6; ++request) {
      auto content = "question " + std::to_string(request) + ": " + std::string(200, static_cast<char>('a' + request));
      json body = {
          {"model", "test-model"}, {"max_tokens", 4}, {"messages", {{{"role", "user"}, {"content", content}}}}};
      Headers session;
      if (request % 3 != 0) {
        session.emplace_back("x-session-id", "session-" + std::to_string(request % 2));
      }
      ASSERT_TRUE(eventually([&] {
        for (const char* id : {"u0", "u1", "u2"}) {
          if (worker_state(harness, id)["in_flight"] != 0) {
            return false;
          }
        }
        return true;
      }));
      auto dry = post_json(harness.admin_port(), "/debug/route", body.dump(), session);
      ASSERT_EQ(dry.status, 200) << dry.body;
      auto response = post_json(envoy.port(), "/v1/chat/completions", body.dump(), session);
      ASSERT_EQ(response.status, 200) << response.body;
      const auto worker = json::parse(dry.body)["worker"].get<std::string>();
      EXPECT_EQ(response.header("x-upstream-id"), worker) << request;
      EXPECT_EQ(response.header("x-kvgate-worker"), worker);
      served.insert(response.header("x-upstream-id"));
    }
    if (std::string(policy) == "round_robin") {
      EXPECT_EQ(served.size(), 3u);
    }
  }
}

// A session's turns through both front doors (Envoy + picker, kvgate's
// proxy), whole and streamed: one worker, one history in the session
// table, the engine's cached tokens in every decision record; the stream
// the client gets ends with [DONE] and carries no usage it did not ask for.
TEST_F(EnvoyFleet, ASessionsTurnsStayTogetherAcrossBothFrontDoorsWholeAndStreamed) {
  start();
  const Headers session{{"x-session-id", "doors"}};
  auto history = first_turn("How deep should a fence post hole be?");
  auto first = chat_through_envoy(chat_request(history, 8), session);
  ASSERT_EQ(first.status, 200) << first.body;
  const auto worker = first.header("x-kvgate-worker");
  ASSERT_FALSE(worker.empty());
  auto reply = json::parse(first.body);
  EXPECT_EQ(reply["object"], "chat.completion");
  EXPECT_GT(reply["usage"]["prompt_tokens"].get<int>(), 0);
  history.push_back({{"role", "assistant"}, {"content", reply["choices"][0]["message"]["content"]}});

  history.push_back({{"role", "user"}, {"content", "And in clay soil?"}});
  auto second = post_json(fleet_.harness.api_port(), "/v1/chat/completions", chat_request(history, 8).dump(), session);
  ASSERT_EQ(second.status, 200);
  EXPECT_EQ(second.header("x-kvgate-worker"), worker);
  history.push_back({{"role", "assistant"}, {"content", json::parse(second.body)["choices"][0]["message"]["content"]}});

  history.push_back({{"role", "user"}, {"content", "And for a gate post?"}});
  auto body = chat_request(history, 8);
  body["stream"] = true;
  EventStream stream(envoy_->port(), "/v1/chat/completions", body.dump(), session);
  ASSERT_EQ(stream.status(), 200);
  EXPECT_EQ(stream.header("x-kvgate-worker"), worker);
  auto events = stream.until_done();
  ASSERT_FALSE(events.empty());
  EXPECT_EQ(events.back(), "[DONE]");
  for (const auto& event : events) {
    EXPECT_EQ(event.find("\"usage\""), std::string::npos) << event;
  }

  auto turns = json::parse(get(fleet_.harness.admin_port(), "/debug/sessions/doors").body)["turns"];
  ASSERT_EQ(turns.size(), 3u) << turns.dump();
  for (const auto& turn : turns) {
    EXPECT_EQ(turn["worker"], worker);
  }
  ASSERT_TRUE(eventually([&] { return read_json_lines(decisions_).size() == 3; }));
  for (const auto& record : read_json_lines(decisions_)) {
    EXPECT_EQ(record["status"], 200);
    EXPECT_FALSE(record["cached_tokens"].is_null()) << record.dump();
    EXPECT_FALSE(record["ttft_ms"].is_null());
  }
  EXPECT_GT(read_json_lines(decisions_).back()["cached_tokens"].get<int>(), 0);
  // Each decision says what first token it expected, beside the one the
  // client got; the streamed turn's pair is the worker's calibration.
  for (const auto& record : read_json_lines(decisions_)) {
    EXPECT_GT(record["expected_ttft_ms"].get<double>(), 0) << record.dump();
  }
  auto calibration = worker_state(fleet_.harness, worker)["ttft_calibration"];
  ASSERT_TRUE(calibration.is_object()) << calibration.dump();
  EXPECT_GE(calibration["samples"].get<int>(), 1);
  EXPECT_GT(calibration["ratio_p50"].get<double>(), 0);
  EXPECT_NE(get(fleet_.harness.admin_port(), "/metrics")
                .body.find("kvgate_worker_ttft_calibration{quantity=\"ratio_p50\",worker=\"" + worker + "\"}"),
            std::string::npos);
}

// A 130 KB prompt (more than two of the picker's body pieces each way):
// picked as the dry run says, answered whole.
TEST_F(EnvoyFleet, A130KilobytePromptIsPickedAndServed) {
  start();
  std::string text;
  for (int word = 0; text.size() < 130'000; ++word) {
    text += "stanza" + std::to_string(word) + " ";
  }
  auto body = chat_request(first_turn(text), 4);
  auto dry = post_json(fleet_.harness.admin_port(), "/debug/route", body.dump());
  ASSERT_EQ(dry.status, 200);
  auto response = chat_through_envoy(body);
  ASSERT_EQ(response.status, 200) << response.body;
  EXPECT_EQ(response.header("x-kvgate-worker"), json::parse(dry.body)["worker"].get<std::string>());
  EXPECT_GT(json::parse(response.body)["usage"]["prompt_tokens"].get<int>(), 10'000);
}

// What the picker refuses reaches the client through Envoy as the OpenAI
// error it sent (status, JSON body, code), counted by the picker; and the
// next request is served.
TEST_F(EnvoyFleet, ThePickersRefusalsReachTheClientAsOpenAIErrors) {
  start("limits: {max_body_size: 64KiB}\nadmission: {max_in_flight: 1}\n");
  auto unknown =
      chat_through_envoy(json{{"model", "no-such-model"}, {"messages", {{{"role", "user"}, {"content", "hi"}}}}});
  EXPECT_EQ(unknown.status, 404) << unknown.body;
  EXPECT_EQ(error_code(unknown), "model_not_found");
  EXPECT_EQ(unknown.header("content-type"), "application/json");

  auto malformed = post_json(envoy_->port(), "/v1/chat/completions", "{\"model\": ");
  EXPECT_EQ(malformed.status, 400) << malformed.body;
  EXPECT_FALSE(error_code(malformed).empty()) << malformed.body;

  auto empty = post_json(envoy_->port(), "/v1/chat/completions", "");
  EXPECT_EQ(empty.status, 400) << empty.body;
  EXPECT_FALSE(error_code(empty).empty()) << empty.body;

  auto large = chat_through_envoy(chat_request(first_turn(std::string(100'000, 'x')), 4));
  EXPECT_EQ(large.status, 413) << large.body;
  EXPECT_FALSE(error_code(large).empty()) << large.body;

  // One request in flight (a long stream held open), the next shed with 429.
  auto long_body = chat_request(first_turn("Write a long essay on timber framing."), 2000);
  long_body["stream"] = true;
  {
    EventStream holding(envoy_->port(), "/v1/chat/completions", long_body.dump());
    ASSERT_EQ(holding.status(), 200);
    ASSERT_TRUE(holding.next_event().has_value());
    auto shed = chat_through_envoy(chat_request(first_turn("Is pine rot resistant?"), 4));
    EXPECT_EQ(shed.status, 429) << shed.body;
    EXPECT_EQ(error_code(shed), "at_capacity");
    EXPECT_FALSE(shed.header("retry-after").empty());
    holding.close();
  }
  auto metrics = get(fleet_.harness.admin_port(), "/metrics").body;
  for (const char* series : {"kvgate_picker_answers_total{code=\"model_not_found\",status=\"404\"} 1",
                             "kvgate_picker_answers_total{code=\"at_capacity\",status=\"429\"} 1"}) {
    EXPECT_NE(metrics.find(series), std::string::npos) << series;
  }
  EXPECT_TRUE(eventually(
      [&] { return chat_through_envoy(chat_request(first_turn("What grit for sanding oak?"), 4)).status == 200; }));
}

// A header-only GET through Envoy is answered by the picker (the models it
// serves) without a replica.
TEST_F(EnvoyFleet, AHeaderOnlyGetIsAnswered) {
  start();
  auto models = get(envoy_->port(), "/v1/models");
  EXPECT_EQ(models.status, 200) << models.body;
  auto listed = json::parse(models.body, nullptr, false);
  ASSERT_TRUE(listed.is_object()) << models.body;
  EXPECT_EQ(listed["data"][0]["id"], "sim-model");
}

// A client that leaves mid-stream: Envoy resets the upstream and the ext_proc
// stream; the worker's request ends (in flight back to 0), the attempt is
// recorded, and the next request is served.
TEST_F(EnvoyFleet, AClientThatLeavesMidStreamEndsItsRequest) {
  start("", 1);
  auto body = chat_request(first_turn("Write a long essay on timber framing."), 4000);
  body["stream"] = true;
  {
    EventStream stream(envoy_->port(), "/v1/chat/completions", body.dump());
    ASSERT_EQ(stream.status(), 200);
    ASSERT_TRUE(stream.next_event().has_value());
    ASSERT_TRUE(eventually([&] { return worker_state(fleet_.harness, "s0")["in_flight"] == 1; }));
    stream.close();
  }
  EXPECT_TRUE(eventually([&] { return worker_state(fleet_.harness, "s0")["in_flight"] == 0; }));
  EXPECT_TRUE(eventually([&] {
    return get(fleet_.harness.admin_port(), "/metrics").body.find("\nkvgate_picker_streams 0") != std::string::npos;
  }));
  ASSERT_TRUE(eventually([&] { return read_json_lines(decisions_).size() == 1; }));
  auto response = chat_through_envoy(chat_request(first_turn("Is pine rot resistant?"), 4));
  EXPECT_EQ(response.status, 200) << response.body;
  auto metrics = get(fleet_.harness.admin_port(), "/metrics").body;
  EXPECT_NE(metrics.find("kvgate_picker_abandoned_total{phase=\"response\"} 1\n"), std::string::npos);
  EXPECT_NE(metrics.find("kvgate_picker_abandoned_total{phase=\"request_body\"} 0\n"), std::string::npos);
}

// Bytes the C++ fixture never sent: a chunked body with trailers, and a
// client that goes away between body pieces. Each is answered or ended as
// a user would expect, and the next request is served.
TEST_F(EnvoyFleet, TrailersAndABodyCutBetweenPiecesLoseNothing) {
  start("", 2);
  const auto body = chat_request(first_turn("Which screws for decking?"), 4).dump();
  std::ostringstream chunked;
  chunked << "POST /v1/chat/completions HTTP/1.1\r\nHost: gateway\r\nContent-Type: application/json\r\n"
          << "Transfer-Encoding: chunked\r\nTrailer: x-checksum\r\nConnection: close\r\n\r\n";
  const auto half = body.size() / 2;
  chunked << std::hex << half << "\r\n" << body.substr(0, half) << "\r\n";
  chunked << std::hex << body.size() - half << "\r\n" << body.substr(half) << "\r\n";
  chunked << "0\r\nx-checksum: abc\r\n\r\n";
  auto answer = raw_exchange(envoy_->port(), chunked.str(), 10s);
  EXPECT_EQ(answer.rfind("HTTP/1.1 200", 0), 0u) << answer.substr(0, 400);
  EXPECT_NE(answer.find("chat.completion"), std::string::npos);

  // Headers promising 4000 bytes, 100 of them sent, then the client leaves.
  std::string cut =
      "POST /v1/chat/completions HTTP/1.1\r\nHost: gateway\r\nContent-Type: application/json\r\n"
      "Content-Length: 4000\r\n\r\n" +
      body.substr(0, 100);
  (void)raw_exchange(envoy_->port(), cut, 500ms);
  EXPECT_TRUE(eventually([&] {
    return get(fleet_.harness.admin_port(), "/metrics").body.find("\nkvgate_picker_streams 0") != std::string::npos;
  }));
  for (const auto& id : ids_) {
    EXPECT_EQ(worker_state(fleet_.harness, id)["in_flight"], 0) << id;
  }
  EXPECT_TRUE(eventually([&] {
    return get(fleet_.harness.admin_port(), "/metrics")
               .body.find("kvgate_picker_abandoned_total{phase=\"request_body\"} 1\n") != std::string::npos;
  }));
  auto response = chat_through_envoy(chat_request(first_turn("And for a pergola?"), 4));
  EXPECT_EQ(response.status, 200) << response.body;
  // The chunked request with trailers ended as it should: not abandoned.
  EXPECT_NE(
      get(fleet_.harness.admin_port(), "/metrics").body.find("kvgate_picker_abandoned_total{phase=\"response\"} 0\n"),
      std::string::npos);
}

// Envoy's failure mode as shipped, fail closed: with the picker killed the
// client gets 503 (which the OpenAI SDKs retry) and no replica sees the
// request; a picker restarted on its port is used again.
TEST_F(EnvoyFleet, FailsClosedWhileThePickerIsDownAndRecoversWhenItReturns) {
  start("", 2);
  const auto body = chat_request(first_turn("What grit for sanding oak?"), 4);
  ASSERT_EQ(chat_through_envoy(body).status, 200);
  const int picker_port = fleet_.harness.epp_port();
  fleet_.harness.gateway().send_signal(SIGKILL);
  ASSERT_TRUE(fleet_.harness.gateway().wait_exit(10s).has_value());
  auto refused = chat_through_envoy(body);
  EXPECT_EQ(refused.status, 503) << refused.body;

  Harness again;
  again.start_gateway("routing: {policy: cache_aware}\nepp_listen: \"127.0.0.1:" + std::to_string(picker_port) + "\"\n",
                      fleet_.models_yaml());
  ASSERT_EQ(again.epp_port(), picker_port);
  EXPECT_TRUE(eventually([&] { return chat_through_envoy(body).status == 200; }, 30s));
}

}  // namespace
}  // namespace kvgate::testing
