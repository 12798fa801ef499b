// The endpoint picker end to end: kvgate with epp_listen in front of
// kvgate-sim replicas, and a client that plays Envoy's ext_proc filter
// (bench/epp/envoy_stream.hpp) over real gRPC: it asks for the pick, sends
// the body to the picked replica itself, and streams the response back
// through the picker, as the data plane of an inference gateway does.
// Only what a real Envoy cannot be driven into, or does not show, is here:
// the answer's fields as sent (metadata, body pieces), the data plane's
// subset hint and protocol faults, thousands of concurrent streams, the
// health service's states. Everything a client sees through Envoy is in
// envoy_test.cpp, against Envoy itself.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <csignal>
#include <fstream>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "envoy_stream.hpp"
#include "grpc/health/v1/health.grpc.pb.h"
#include "support/admin.hpp"
#include "support/fleet.hpp"

namespace kvgate::testing {
namespace {

using epp::EnvoyStream;
using epp::HeaderList;
using epp::RequestAnswer;
using nlohmann::json;
using namespace std::chrono_literals;

std::shared_ptr<grpc::Channel> picker_channel(int port) {
  return grpc::CreateChannel("127.0.0.1:" + std::to_string(port), grpc::InsecureChannelCredentials());
}

HeaderList request_headers(const std::string& path = "/v1/chat/completions", const HeaderList& more = {},
                           const std::string& method = "POST") {
  HeaderList headers{
      {":method", method}, {":path", path}, {":authority", "gateway"}, {"content-type", "application/json"}};
  headers.insert(headers.end(), more.begin(), more.end());
  return headers;
}

int port_of(const std::string& endpoint) {
  return std::stoi(endpoint.substr(endpoint.rfind(':') + 1));
}

std::string endpoint_of(const SimProcess& sim) {
  return "127.0.0.1:" + std::to_string(sim.port());
}

// Envoy's data path for a pick: the request to the picked endpoint, its
// response through the picker (headers, then the body in two pieces).
// Returns the body the client receives.
std::string forward_through(EnvoyStream& stream, const RequestAnswer& answer, const std::string& path,
                            HeaderList* added = nullptr) {
  auto upstream = post_json(port_of(answer.endpoint()), path, answer.body);
  EXPECT_EQ(upstream.status, 200) << upstream.body;
  const auto type = upstream.headers.count("content-type") != 0 ? upstream.headers.at("content-type")
                                                                : std::string("application/json");
  auto headers = stream.send_response_headers(upstream.status, type, false);
  EXPECT_TRUE(headers.has_value());
  if (added != nullptr && headers) {
    *added = *headers;
  }
  const auto half = upstream.body.size() / 2;
  std::string client;
  auto first = stream.send_response_body(std::string_view(upstream.body).substr(0, half), false);
  auto second = stream.send_response_body(std::string_view(upstream.body).substr(half), true);
  EXPECT_TRUE(first && second);
  client = first.value_or("") + second.value_or("");
  EXPECT_TRUE(stream.finish().ok());
  return client;
}

std::string error_code(const epp::ext_proc::ImmediateResponse& immediate) {
  auto body = json::parse(immediate.body(), nullptr, false);
  return body.is_object() && body["error"]["code"].is_string() ? body["error"]["code"].get<std::string>() : "";
}

class PickerFleet : public ::testing::Test {
 protected:
  void start(const std::string& settings = "", int sims = 3) {
    for (int at = 0; at < sims; ++at) {
      ids_.push_back("s" + std::to_string(at));
      fleet_.add_sim(ids_.back());
    }
    decisions_ = fleet_.harness.folder() + "/decisions.jsonl";
    fleet_.start_gateway("epp_listen: \"127.0.0.1:0\"\ndecision_log: \"" + decisions_ + "\"\n" + settings);
    ASSERT_NE(fleet_.harness.epp_port(), 0);
    channel_ = picker_channel(fleet_.harness.epp_port());
    stub_ = epp::ext_proc::ExternalProcessor::NewStub(channel_);
  }

  // The worker id whose endpoint is `endpoint`.
  std::string worker_at(const std::string& endpoint) {
    for (const auto& id : ids_) {
      if (endpoint_of(fleet_.sim(id)) == endpoint) {
        return id;
      }
    }
    return "?";
  }

  Fleet fleet_;
  std::vector<std::string> ids_;
  std::string decisions_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<epp::ext_proc::ExternalProcessor::Stub> stub_;
};

// The pick is the router's: what POST /debug/route predicts for the same
// body and headers, for two sessions' growing turns; the response streamed
// back through the picker ends the attempt as in proxy mode (the decision
// log has the engine's cached tokens, the session table the turns).
TEST_F(PickerFleet, PicksWhatTheDryRunPredictsAndLearnsFromTheResponse) {
  start();
  std::map<std::string, json> histories;
  std::map<std::string, std::string> workers;
  for (int turn = 0; turn < 3; ++turn) {
    for (const std::string session : {"alpha", "beta"}) {
      auto& history = histories[session];
      if (history.is_null()) {
        history = first_turn("Session " + session + ": which screws hold a deck board to a joist?");
      } else {
        history.push_back({{"role", "user"}, {"content", "And turn " + std::to_string(turn) + " of " + session + "?"}});
      }
      const auto body = chat_request(history, 8).dump();
      const Headers session_header{{"x-session-id", session}};
      auto dry = post_json(fleet_.harness.admin_port(), "/debug/route", body, session_header);
      ASSERT_EQ(dry.status, 200) << dry.body;
      const auto predicted = json::parse(dry.body)["worker"].get<std::string>();

      EnvoyStream stream(*stub_);
      // Headers, then the body in three pieces.
      auto answer = stream.send_request(request_headers("/v1/chat/completions", {{"x-session-id", session}}), body, 3);
      ASSERT_TRUE(answer.stream_ok) << answer.error;
      ASSERT_FALSE(answer.immediate) << answer.immediate->body();
      EXPECT_EQ(worker_at(answer.endpoint()), predicted) << "turn " << turn << " " << session;
      // The header is the pick alone (ORIGINAL_DST parses one address); the
      // metadata lists the pick first, then the fallback.
      EXPECT_EQ(answer.metadata_destination.substr(0, answer.metadata_destination.find(',')), answer.destination);
      EXPECT_TRUE(answer.clear_route_cache);
      EXPECT_EQ(answer.body, body);  // nothing to change in this body
      EXPECT_EQ(answer.header("content-length"), std::to_string(body.size()));
      EXPECT_FALSE(answer.header("x-request-id").empty());
      HeaderList added;
      auto client = forward_through(stream, answer, "/v1/chat/completions", &added);
      auto reply = json::parse(client);
      history.push_back({{"role", "assistant"}, {"content", reply["choices"][0]["message"]["content"]}});
      if (turn > 0) {
        EXPECT_EQ(worker_at(answer.endpoint()), workers[session]) << "a session's later turn stays";
      }
      workers[session] = worker_at(answer.endpoint());
      bool names_worker = false;
      for (const auto& [name, value] : added) {
        names_worker |= name == "x-kvgate-worker" && value == workers[session];
      }
      EXPECT_TRUE(names_worker);
    }
  }
  ASSERT_TRUE(eventually([&] { return read_json_lines(decisions_).size() == 6; }));
  int cached_later_turns = 0;
  for (const auto& record : read_json_lines(decisions_)) {
    EXPECT_EQ(record["status"], 200);
    EXPECT_FALSE(record["cached_tokens"].is_null()) << record.dump();
    EXPECT_FALSE(record["ttft_ms"].is_null());
    if (record["session_turn"].is_number() && record["session_turn"].get<int>() > 1) {
      cached_later_turns += record["cached_tokens"].get<int>() > 0 ? 1 : 0;
    }
  }
  EXPECT_EQ(cached_later_turns, 4);
  auto session = json::parse(get(fleet_.harness.admin_port(), "/debug/sessions/alpha").body);
  ASSERT_EQ(session["turns"].size(), 3u) << session.dump();
  EXPECT_FALSE(session["turns"][2]["cached_tokens"].is_null());
}

// A disaggregated model: the pick is a decoder; a long prompt's prefill is
// named for llm-d's sidecar (x-prefiller-host-port), a short one is not.
TEST(Picker, ADisaggregatedPickIsTheDecoderWithThePrefillWorkerNamed) {
  Harness harness;
  std::map<std::string, std::string> ids;  // endpoint -> worker id
  for (const char* id : {"p0", "d0", "d1"}) {
    ids["127.0.0.1:" + std::to_string(harness.start_upstream(id).port)] = id;
  }
  std::string models =
      "models:\n  - name: test-model\n    disaggregation: {protocol: vllm, local_prefill_tokens: 64}\n"
      "    workers:\n";
  for (const char* id : {"p0", "d0", "d1"}) {
    models += std::string("      - {id: ") + id + ", url: \"" + harness.upstream(id).url() +
              "\", role: " + (id[0] == 'p' ? "prefill" : "decode") + "}\n";
  }
  harness.start_gateway("epp_listen: \"127.0.0.1:0\"\n", models);
  auto stub = epp::ext_proc::ExternalProcessor::NewStub(picker_channel(harness.epp_port()));
  const auto prefill_endpoint = "127.0.0.1:" + std::to_string(harness.upstream("p0").port);
  std::string long_text;
  for (int word = 0; word < 300; ++word) {
    long_text += "word" + std::to_string(word) + " ";
  }
  for (const auto& [content, remote] : {std::pair{long_text, true}, std::pair{std::string("hi"), false}}) {
    json body = {{"model", "test-model"}, {"max_tokens", 2}, {"messages", {{{"role", "user"}, {"content", content}}}}};
    EnvoyStream stream(*stub);
    auto answer = stream.send_request(request_headers(), body.dump(), 2);
    ASSERT_TRUE(answer.stream_ok && !answer.immediate) << answer.error;
    EXPECT_EQ(ids[answer.endpoint()].front(), 'd');
    EXPECT_EQ(answer.header("x-prefiller-host-port"), remote ? prefill_endpoint : "") << content.size();
    forward_through(stream, answer, "/v1/chat/completions");
  }
  // The prefill worker's accounting ended with the decoder's answer.
  EXPECT_TRUE(eventually([&] { return worker_state(harness, "p0")["in_flight"] == 0; }));
}

// Every bad request is answered (a local reply in OpenAI's error shape, the
// right status), counted, and the picker keeps serving the next stream.
TEST_F(PickerFleet, BadInputGetsALocalReplyAndLosesNothing) {
  start("limits: {max_body_size: 4KiB}\n");
  struct Case {
    std::string name;
    HeaderList headers;
    std::string body;
    std::optional<std::vector<std::string>> subset;
    int status;
    std::string code;
  };
  const auto good = chat_request(first_turn("Which drill bit for tiles?"), 4).dump();
  std::vector<Case> cases{
      {"not JSON", request_headers(), "{\"model\": \"sim-model\", \"messages\": [", std::nullopt, 400, ""},
      {"unknown model", request_headers(),
       json{{"model", "no-such-model"}, {"messages", json::array({{{"role", "user"}, {"content", "hi"}}})}}.dump(),
       std::nullopt, 404, "model_not_found"},
      {"oversized body", request_headers(), chat_request(first_turn(std::string(8000, 'x'))).dump(), std::nullopt, 413,
       ""},
      {"wrong method", request_headers("/v1/chat/completions", {}, "GET"), "", std::nullopt, 405, ""},
      {"not an API path", request_headers("/admin"), "", std::nullopt, 404, ""},
      {"an empty subset", request_headers(), good, std::vector<std::string>{}, 503, ""},
      {"a subset of strangers", request_headers(), good, std::vector<std::string>{"10.9.9.9:8000"}, 503, ""},
  };
  for (const auto& bad : cases) {
    SCOPED_TRACE(bad.name);
    EnvoyStream stream(*stub_);
    // Four pieces: the oversized body is refused at its third, and its
    // fourth arrives after the local reply (nothing is owed for it).
    auto answer = stream.send_request(bad.headers, bad.body, 4, bad.subset);
    ASSERT_TRUE(answer.stream_ok) << answer.error;
    ASSERT_TRUE(answer.immediate.has_value()) << answer.destination;
    EXPECT_EQ(static_cast<int>(answer.immediate->status().code()), bad.status);
    auto error = json::parse(answer.immediate->body(), nullptr, false);
    ASSERT_TRUE(error.is_object()) << answer.immediate->body();
    EXPECT_TRUE(error["error"]["message"].is_string());
    if (!bad.code.empty()) {
      EXPECT_EQ(error_code(*answer.immediate), bad.code);
    }
    stream.finish();
  }
  // A subset hint the gateway got wrong: not a list.
  {
    EnvoyStream stream(*stub_);
    epp::ext_proc::ProcessingRequest request;
    auto* header = request.mutable_request_headers()->mutable_headers()->add_headers();
    header->set_key(":path");
    header->set_raw_value("/v1/chat/completions");
    request.mutable_request_headers()->set_end_of_stream(true);
    auto& hint = (*request.mutable_metadata_context()->mutable_filter_metadata())["envoy.lb.subset_hint"];
    (*hint.mutable_fields())["x-gateway-destination-endpoint-subset"].set_string_value("10.0.0.1:8000");
    grpc::ClientContext context;
    auto raw = stub_->Process(&context);
    ASSERT_TRUE(raw->Write(request));
    epp::ext_proc::ProcessingResponse response;
    ASSERT_TRUE(raw->Read(&response));
    ASSERT_TRUE(response.has_immediate_response());
    EXPECT_EQ(static_cast<int>(response.immediate_response().status().code()), 500);
    raw->WritesDone();
    raw->Finish();
  }
  // Streams that end mid-body, one half-closed and one cancelled.
  for (bool cancel : {false, true}) {
    EnvoyStream stream(*stub_);
    stream.send_request(request_headers(), good, 2, std::nullopt, /*end_body=*/false);
    if (cancel) {
      stream.cancel();
    }
    stream.finish();
  }
  // A body the subset allows is picked from the subset.
  EnvoyStream subset_stream(*stub_);
  auto only_s2 =
      subset_stream.send_request(request_headers(), good, 1, std::vector<std::string>{endpoint_of(fleet_.sim("s2"))});
  ASSERT_TRUE(only_s2.stream_ok && !only_s2.immediate);
  EXPECT_EQ(only_s2.endpoint(), endpoint_of(fleet_.sim("s2")));
  forward_through(subset_stream, only_s2, "/v1/chat/completions");
  EXPECT_EQ(metric_value(fleet_.harness, R"(kvgate_picker_answers_total{code="model_not_found",status="404"})"), 1);
  EXPECT_GE(metric_value(fleet_.harness, R"(kvgate_picker_answers_total{code="picked",status="200"})"), 1);
  ASSERT_TRUE(eventually([&] { return metric_value(fleet_.harness, "kvgate_picker_streams") == 0; }));
  EXPECT_EQ(metric_value(fleet_.harness, "kvgate_picker_protocol_errors_total"), 0);
  // No attempt is left holding a worker.
  for (const char* id : {"s0", "s1", "s2"}) {
    EXPECT_EQ(worker_state(fleet_.harness, id)["in_flight"], 0) << id;
  }
}

// Thousands of streams at once, every tenth cancelled mid-body: every other
// one gets its pick, and nothing stays held afterwards.
TEST_F(PickerFleet, ThousandsOfConcurrentStreamsAreAllAnswered) {
  start("limits: {max_connections: 100000}\n");
  constexpr int kThreads = 4;
  constexpr int kPerThread = 500;
  std::atomic<int> picked{0};
  std::atomic<int> failed{0};
  std::vector<std::thread> threads;
  for (int thread = 0; thread < kThreads; ++thread) {
    threads.emplace_back([&, thread] {
      std::vector<std::unique_ptr<EnvoyStream>> streams;
      for (int at = 0; at < kPerThread; ++at) {
        auto& stream = streams.emplace_back(std::make_unique<EnvoyStream>(*stub_, 60s));
        const int number = thread * kPerThread + at;
        const auto body = chat_request(first_turn("Question number " + std::to_string(number)), 2).dump();
        if (number % 10 == 0) {
          stream->send_request(request_headers(), body, 2, std::nullopt, false);
          stream->cancel();
          continue;
        }
        auto answer = stream->send_request(request_headers(), body, 2);
        (answer.stream_ok && !answer.immediate && !answer.destination.empty() ? picked : failed)++;
      }
      for (auto& stream : streams) {
        stream->finish();
      }
    });
  }
  for (auto& thread : threads) {
    thread.join();
  }
  EXPECT_EQ(picked.load(), kThreads * kPerThread * 9 / 10);
  EXPECT_EQ(failed.load(), 0);
  ASSERT_TRUE(eventually([&] { return metric_value(fleet_.harness, "kvgate_picker_streams") == 0; }, 30s));
  for (const char* id : {"s0", "s1", "s2"}) {
    EXPECT_EQ(worker_state(fleet_.harness, id)["in_flight"], 0) << id;
  }
}

grpc::health::v1::HealthCheckResponse::ServingStatus health(grpc::health::v1::Health::Stub& stub,
                                                            const std::string& service) {
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + 2s);
  grpc::health::v1::HealthCheckRequest request;
  request.set_service(service);
  grpc::health::v1::HealthCheckResponse response;
  auto status = stub.Check(&context, request, &response);
  return status.ok() ? response.status() : grpc::health::v1::HealthCheckResponse::UNKNOWN;
}

// Health over gRPC: live and ready; once draining, not ready while a stream
// is still open, and the process ends when it closes.
TEST_F(PickerFleet, HealthTurnsNotReadyWhileDraining) {
  start("timeouts: {shutdown_grace: 30s}\n", 1);
  auto health_stub = grpc::health::v1::Health::NewStub(channel_);
  using Status = grpc::health::v1::HealthCheckResponse;
  EXPECT_EQ(health(*health_stub, "liveness"), Status::SERVING);
  EXPECT_EQ(health(*health_stub, "readiness"), Status::SERVING);
  EXPECT_EQ(health(*health_stub, "envoy.service.ext_proc.v3.ExternalProcessor"), Status::SERVING);
  EnvoyStream open(*stub_);
  auto answer = open.send_request(request_headers(), chat_request(first_turn("Is pine rot resistant?"), 4).dump());
  ASSERT_TRUE(answer.stream_ok && !answer.immediate);
  fleet_.harness.gateway().send_signal(SIGTERM);
  EXPECT_TRUE(eventually([&] { return health(*health_stub, "readiness") == Status::NOT_SERVING; }));
  EXPECT_EQ(health(*health_stub, "liveness"), Status::SERVING);
  forward_through(open, answer, "/v1/chat/completions");
  auto exit = fleet_.harness.gateway().wait_exit(10s);
  ASSERT_TRUE(exit.has_value());
  EXPECT_EQ(*exit, 0);
}

}  // namespace
}  // namespace kvgate::testing
