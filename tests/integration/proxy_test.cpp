// The gateway in front of real kvgate-test-upstream processes: routing,
// relay, cancellation, retries and the error statuses of the contract.
#include <gtest/gtest.h>

#include <csignal>
#include <fstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "support/harness.hpp"

namespace kvgate::testing {
namespace {

using nlohmann::json;
using namespace std::chrono_literals;

class ProxyTest : public ::testing::Test {
 protected:
  void start_two(const std::string& settings = "routing: {policy: round_robin}\n") {
    harness.start_upstream("u0");
    harness.start_upstream("u1");
    harness.start_gateway(settings, harness.models_for_upstreams());
  }
  HttpResponse chat(const std::string& body = chat_body(), const Headers& headers = {}) {
    return post_json(harness.api_port(), "/v1/chat/completions", body, headers);
  }
  static json error_of(const HttpResponse& response) { return json::parse(response.body).at("error"); }

  Harness harness;
};

TEST_F(ProxyTest, RoundRobinSpreadsRequestsAndLabelsTheWorker) {
  start_two();
  std::vector<std::string> workers;
  for (int index = 0; index < 4; ++index) {
    auto response = chat();
    ASSERT_EQ(response.status, 200) << response.body;
    workers.push_back(response.header("x-kvgate-worker"));
    // The worker named in the header is the one that produced the body.
    EXPECT_EQ(json::parse(response.body)["system_fingerprint"], workers.back());
    EXPECT_EQ(response.header("x-request-id").size(), 32u);
  }
  EXPECT_NE(workers[0], workers[1]);
  EXPECT_EQ(workers[0], workers[2]);
  EXPECT_EQ(workers[1], workers[3]);
}

TEST_F(ProxyTest, ForwardsBodyAndEndToEndHeadersButNotHopByHopOnes) {
  start_two();
  auto body = chat_body(false, 2, R"(,"temperature":0.5,"seed":7)");
  auto response = chat(body, {{"x-request-id", "client-chosen-id"},
                              {"x-custom", "kept"},
                              {"connection", "keep-alive, x-hop"},
                              {"x-hop", "dropped"}});
  ASSERT_EQ(response.status, 200);
  EXPECT_EQ(response.header("x-request-id"), "client-chosen-id");
  auto seen = json::parse(get(harness.upstream(response.header("x-kvgate-worker")).port, "/control/last_request").body);
  EXPECT_EQ(seen["body"], body);
  EXPECT_EQ(seen["target"], "/v1/chat/completions");
  EXPECT_EQ(seen["headers"]["x-custom"], "kept");
  EXPECT_EQ(seen["headers"]["x-request-id"], "client-chosen-id");
  EXPECT_FALSE(seen["headers"].contains("x-hop"));
}

TEST_F(ProxyTest, StreamEventsReachTheClientBeforeTheUpstreamFinishes) {
  start_two();
  EventStream stream(harness.api_port(), "/v1/chat/completions", chat_body(true, 5),
                     {{"x-test-fault", "hold_after:2"}});
  ASSERT_EQ(stream.status(), 200);
  EXPECT_EQ(stream.header("content-type"), "text/event-stream");
  auto worker = stream.header("x-kvgate-worker");
  // Role event plus two tokens arrive while the upstream still holds the rest.
  for (int index = 0; index < 3; ++index) {
    ASSERT_TRUE(stream.next_event());
  }
  auto stats = json::parse(get(harness.upstream(worker).port, "/control/stats").body);
  EXPECT_EQ(stats["completed"], 0);
  post_json(harness.upstream(worker).port, "/control/release", "{}");
  auto rest = stream.rest();
  ASSERT_EQ(rest.size(), 4u);  // tok2, tok3, tok4, [DONE]
  EXPECT_EQ(rest.back(), "[DONE]");
  EXPECT_EQ(json::parse(rest[0])["choices"][0]["delta"]["content"], "tok2 ");
}

// Engines send a stream's header at once and its first event after the
// prefill: the prompt counts as pending prefill until that first event, and
// the time to it is the worker's time to first token.
TEST_F(ProxyTest, AStreamIsPendingPrefillUntilItsFirstEventAndTimesTheWorkersFirstToken) {
  start_two();
  auto worker_state = [&](const std::string& id) {
    auto workers = json::parse(get(harness.admin_port(), "/debug/workers").body);
    for (const auto& worker : workers["workers"]) {
      if (worker["id"] == id) {
        return worker;
      }
    }
    return json();
  };
  EventStream stream(harness.api_port(), "/v1/chat/completions", chat_body(true, 3), {{"x-test-fault", "hold_first"}});
  ASSERT_EQ(stream.status(), 200);
  auto worker = stream.header("x-kvgate-worker");
  auto held = worker_state(worker);
  EXPECT_EQ(held["in_flight"], 1);
  EXPECT_GT(held["pending_prefill_tokens"].get<int>(), 0);
  EXPECT_TRUE(held["recent_ttft_ms"].is_null());

  post_json(harness.upstream(worker).port, "/control/release", "{}");
  ASSERT_EQ(stream.rest().back(), "[DONE]");
  auto answered = worker_state(worker);
  EXPECT_EQ(answered["pending_prefill_tokens"], 0);
  ASSERT_TRUE(answered["recent_ttft_ms"].is_number()) << answered.dump();
  EXPECT_GT(answered["recent_ttft_ms"].get<double>(), 0.0);
}

TEST_F(ProxyTest, ClientLeavingMidStreamClosesTheUpstreamConnection) {
  start_two();
  EventStream stream(harness.api_port(), "/v1/chat/completions", chat_body(true, 50),
                     {{"x-test-fault", "hold_after:1"}});
  auto worker = stream.header("x-kvgate-worker");
  ASSERT_TRUE(stream.next_event());
  ASSERT_TRUE(stream.next_event());
  stream.close();
  auto stats = json::parse(harness.wait_upstream(worker, "aborted=1").body);
  EXPECT_EQ(stats["aborted"], 1);
  EXPECT_EQ(stats["completed"], 0);
}

// The openai SDK stops reading at "data: [DONE]" and closes; the engine's
// answer was complete, so the exchange is recorded as completed, with the
// engine's usage (which kvgate asked for and stripped from the stream).
TEST_F(ProxyTest, AClientThatLeavesAfterDoneIsACompletedRequestWithItsUsage) {
  harness.start_upstream("u0");
  auto log = harness.folder() + "/decisions.jsonl";
  harness.start_gateway("decision_log: \"" + log + "\"\n", harness.models_for_upstreams());
  EventStream stream(harness.api_port(), "/v1/chat/completions", chat_body(true, 3), {{"x-test-fault", "hold_last"}});
  ASSERT_EQ(stream.status(), 200);
  std::vector<std::string> events;
  while (auto event = stream.next_event()) {
    events.push_back(*event);
    if (*event == "[DONE]") {
      break;
    }
  }
  ASSERT_FALSE(events.empty());
  ASSERT_EQ(events.back(), "[DONE]");
  for (const auto& event : events) {
    EXPECT_EQ(event.find("\"usage\""), std::string::npos) << event;  // the client did not ask for it
  }
  stream.close();  // before the body's end, which the upstream holds back
  harness.wait_upstream("u0", "aborted=1");
  std::vector<json> records;
  for (int attempt = 0; attempt < 100 && records.empty(); ++attempt) {
    harness.gateway().send_signal(SIGHUP);  // reopens the log, flushing what was written
    std::this_thread::sleep_for(20ms);      // the decision log is written by a background thread
    std::ifstream file(log);
    for (std::string line; std::getline(file, line);) {
      records.push_back(json::parse(line));
    }
  }
  ASSERT_EQ(records.size(), 1u);
  EXPECT_EQ(records[0]["client_gone"], false) << records[0].dump();
  EXPECT_EQ(records[0]["status"], 200);
  EXPECT_EQ(records[0]["cached_tokens"], 0);  // the test upstream reports no cache hit
  EXPECT_EQ(records[0]["output_tokens"], 3);
  auto metrics = get(harness.admin_port(), "/metrics").body;
  EXPECT_NE(metrics.find("kvgate_cache_predictions_total{outcome=\"exact\",worker=\"u0\"} 1"), std::string::npos)
      << metrics;
  EXPECT_NE(metrics.find("kvgate_time_to_first_token_seconds_count{model=\"test-model\",worker=\"u0\"} 1"),
            std::string::npos);
}

// W3C trace context: the client's traceparent and tracestate reach the
// worker unchanged, and a valid trace id names the request in the access
// log and the decision log; an invalid header is still passed on (kvgate
// does not trace) but names nothing.
TEST_F(ProxyTest, TheTraceContextPassesThroughAndNamesTheRequestInTheLogs) {
  harness.start_upstream("u0");
  auto log = harness.folder() + "/decisions.jsonl";
  harness.start_gateway("decision_log: \"" + log + "\"\naccess_log: true\n", harness.models_for_upstreams());
  const std::string traceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
  auto response = chat(chat_body(), {{"traceparent", traceparent}, {"tracestate", "vendor=opaque"}});
  ASSERT_EQ(response.status, 200);
  auto seen = json::parse(get(harness.upstream("u0").port, "/control/last_request").body);
  EXPECT_EQ(seen["headers"]["traceparent"], traceparent);
  EXPECT_EQ(seen["headers"]["tracestate"], "vendor=opaque");
  const std::string invalid = "00-00000000000000000000000000000000-00f067aa0ba902b7-01";
  ASSERT_EQ(chat(chat_body(), {{"traceparent", invalid}}).status, 200);
  seen = json::parse(get(harness.upstream("u0").port, "/control/last_request").body);
  EXPECT_EQ(seen["headers"]["traceparent"], invalid);

  std::vector<json> records;
  for (int attempt = 0; attempt < 100 && records.size() < 2; ++attempt) {
    records.clear();
    harness.gateway().send_signal(SIGHUP);  // reopens the log, flushing what was written
    std::this_thread::sleep_for(20ms);
    std::ifstream file(log);
    for (std::string line; std::getline(file, line);) {
      // A line still being written does not parse yet: read again.
      if (auto record = json::parse(line, nullptr, false); !record.is_discarded()) {
        records.push_back(std::move(record));
      }
    }
  }
  ASSERT_EQ(records.size(), 2u);
  EXPECT_EQ(records[0]["trace_id"], "4bf92f3577b34da6a3ce929d0e0e4736");
  EXPECT_TRUE(records[1]["trace_id"].is_null());
  harness.gateway().stop();
  const auto stderr_text = harness.gateway().stderr_text();
  EXPECT_NE(stderr_text.find("trace_id=4bf92f3577b34da6a3ce929d0e0e4736"), std::string::npos) << stderr_text;
  EXPECT_NE(stderr_text.find("trace_id=-"), std::string::npos);
}

// A prompt the engine refuses (e.g. llama.cpp's 400 exceed_context_size)
// was not cached there: the routing-time insert is withdrawn, so the same
// request is not predicted a hit on that worker. An accepted one stays.
TEST_F(ProxyTest, ARequestTheEngineRefusedIsNotCreditedAsCached) {
  harness.start_upstream("u0");
  harness.start_gateway("routing: {policy: cache_aware}\n", harness.models_for_upstreams());
  auto body = [](const std::string& topic) {
    return json{{"model", "test-model"},
                {"max_tokens", 2},
                {"messages", {{{"role", "user"}, {"content", topic + std::string(400, 'q')}}}}}
        .dump();
  };
  auto predicted = [&](const std::string& request) {
    auto route = json::parse(post_json(harness.admin_port(), "/debug/route", request).body);
    return route["candidates"][0]["cached_tokens"].get<int>();
  };
  ASSERT_EQ(chat(body("accepted "), {}).status, 200);
  auto refused = chat(body("refused "), {{"x-test-fault", "status:400"}});
  ASSERT_EQ(refused.status, 400);
  // Routing-time inserts and withdrawals reach the index through its writer
  // thread: wait until the accepted prompt is indexed, then the refused one
  // has been withdrawn too (same queue, in order).
  for (int attempt = 0; attempt < 100 && predicted(body("accepted ")) == 0; ++attempt) {
    std::this_thread::sleep_for(20ms);
  }
  auto probe = body("probe ");
  ASSERT_EQ(chat(probe).status, 200);  // queued after the withdrawal
  for (int attempt = 0; attempt < 100 && predicted(probe) == 0; ++attempt) {
    std::this_thread::sleep_for(20ms);
  }
  EXPECT_GT(predicted(body("accepted ")), 0);
  EXPECT_EQ(predicted(body("refused ")), 0);
}

TEST_F(ProxyTest, ClientLeavingBeforeTheResponseHeaderClosesTheUpstream) {
  start_two();
  auto bytes = std::string("POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nx-test-fault: stall\r\n") +
               "Content-Type: application/json\r\nContent-Length: " + std::to_string(chat_body().size()) + "\r\n\r\n" +
               chat_body();
  // The client gives up after 300 ms without an answer.
  EXPECT_EQ(raw_exchange(harness.api_port(), bytes, 300ms), "");
  auto stats0 = json::parse(get(harness.upstream("u0").port, "/control/stats").body);
  auto stalled = stats0["requests"] == 1 ? "u0" : "u1";
  auto stats = json::parse(harness.wait_upstream(stalled, "aborted=1").body);
  EXPECT_EQ(stats["aborted"], 1);
}

TEST_F(ProxyTest, UpstreamDyingMidStreamEndsWithAnErrorEventAndDone) {
  start_two();
  EventStream stream(harness.api_port(), "/v1/chat/completions", chat_body(true, 10),
                     {{"x-test-fault", "drop_after:3"}});
  ASSERT_EQ(stream.status(), 200);
  auto events = stream.rest();
  ASSERT_GE(events.size(), 3u);
  EXPECT_EQ(events.back(), "[DONE]");
  auto error = json::parse(events[events.size() - 2]).at("error");
  EXPECT_EQ(error["code"], "upstream_stream_interrupted");
  EXPECT_EQ(error["type"], "server_error");
  // Four events came through before the error: the role and tok0..tok2.
  EXPECT_EQ(events.size(), 6u);
}

TEST_F(ProxyTest, AStreamThatGoesSilentIsCutWithAnErrorEventAndDone) {
  start_two("routing: {policy: round_robin}\ntimeouts: {upstream_idle: 300ms}\n");
  EventStream stream(harness.api_port(), "/v1/chat/completions", chat_body(true, 10),
                     {{"x-test-fault", "hold_after:2"}});
  ASSERT_EQ(stream.status(), 200);
  auto events = stream.rest();
  ASSERT_GE(events.size(), 2u);
  EXPECT_EQ(events.back(), "[DONE]");
  auto error = json::parse(events[events.size() - 2]).at("error");
  EXPECT_EQ(error["code"], "upstream_timeout");
  // The role event, tok0 and tok1 came through; then one error and [DONE].
  EXPECT_EQ(events.size(), 5u);
  auto metrics = get(harness.admin_port(), "/metrics").body;
  for (const char* worker : {"u0", "u1"}) {
    EXPECT_NE(metrics.find("kvgate_worker_ejected{worker=\"" + std::string(worker) + "\"} 0"), std::string::npos)
        << "one failure ejects nothing";
  }
}

TEST_F(ProxyTest, RefusedConnectionIsRetriedOnAnotherWorker) {
  RefusingPort refusing;
  harness.start_upstream("u1");
  // Outlier ejection takes the dead worker out after two refused connects;
  // active checks are too slow (1h) to interfere.
  harness.start_gateway(
      "routing: {policy: round_robin}\nhealth_check: {interval: 1h}\n"
      "outlier_detection: {consecutive_failures: 2}\n",
      Harness::models_yaml(
          {{"dead", "http://127.0.0.1:" + std::to_string(refusing.port())}, {"u1", harness.upstream("u1").url()}}));
  for (int index = 0; index < 4; ++index) {
    auto response = chat();
    ASSERT_EQ(response.status, 200) << response.body;
    EXPECT_EQ(response.header("x-kvgate-worker"), "u1");
  }
  auto metrics = get(harness.admin_port(), "/metrics").body;
  EXPECT_NE(metrics.find("kvgate_retries_total{model=\"test-model\"} 2"), std::string::npos) << metrics;
  EXPECT_NE(metrics.find("kvgate_upstream_errors_total{kind=\"connect\",worker=\"dead\"} 2"), std::string::npos);
}

TEST_F(ProxyTest, FailureAfterRetriesIs502) {
  RefusingPort first;
  RefusingPort second;
  harness.start_gateway("health_check: {enabled: false}\n",
                        Harness::models_yaml({{"a", "http://127.0.0.1:" + std::to_string(first.port())},
                                              {"b", "http://127.0.0.1:" + std::to_string(second.port())}}));
  auto response = chat();
  EXPECT_EQ(response.status, 502);
  EXPECT_EQ(error_of(response)["code"], "upstream_error");
  EXPECT_EQ(error_of(response)["type"], "server_error");
}

TEST_F(ProxyTest, NoHealthyWorkerIs503) {
  harness.start_upstream("u0");
  harness.start_gateway("health_check: {interval: 50ms, timeout: 500ms, unhealthy_threshold: 1}\n",
                        harness.models_for_upstreams());
  post_json(harness.upstream("u0").port, "/control/health", R"({"healthy": false})");
  // Readiness flips once the checker has seen the failure.
  auto deadline = std::chrono::steady_clock::now() + 10s;
  while (get(harness.admin_port(), "/readyz").status != 503) {
    ASSERT_LT(std::chrono::steady_clock::now(), deadline) << "worker never marked down";
    harness.wait_upstream("u0", "requests=1000&timeout_ms=50");  // paces the loop on the upstream's clock
  }
  auto response = chat();
  EXPECT_EQ(response.status, 503);
  EXPECT_EQ(error_of(response)["code"], "no_healthy_worker");
}

TEST_F(ProxyTest, SilentWorkerIs504) {
  start_two("routing: {policy: round_robin}\ntimeouts: {upstream_response: 300ms}\nupstream: {retries: 0}\n");
  auto response = chat(chat_body(), {{"x-test-fault", "stall"}});
  EXPECT_EQ(response.status, 504);
  EXPECT_EQ(error_of(response)["code"], "upstream_timeout");
}

TEST_F(ProxyTest, UpstreamErrorsArePassedThroughUnchanged) {
  start_two();
  auto response = chat(chat_body(), {{"x-test-fault", "status:500"}});
  EXPECT_EQ(response.status, 500);
  EXPECT_EQ(error_of(response)["message"], "injected failure");
  EXPECT_FALSE(response.header("x-kvgate-worker").empty());
}

TEST_F(ProxyTest, BadRequestsGetOpenAiErrors) {
  start_two("limits: {max_body_size: 2KiB}\n");
  auto malformed = chat("{\"model\": ");
  EXPECT_EQ(malformed.status, 400);
  EXPECT_EQ(error_of(malformed)["code"], "invalid_json");
  auto wrong_type = chat(R"({"model":"test-model","messages":"hello"})");
  EXPECT_EQ(wrong_type.status, 400);
  EXPECT_EQ(error_of(wrong_type)["param"], "messages");
  auto invalid_utf8 = chat("{\"model\":\"test-model\",\"messages\":[{\"role\":\"user\",\"content\":\"\xc3\x28\"}]}");
  EXPECT_EQ(invalid_utf8.status, 400);
  auto unknown = chat(R"({"model":"gpt-9","messages":[{"role":"user","content":"x"}]})");
  EXPECT_EQ(unknown.status, 404);
  EXPECT_EQ(error_of(unknown)["code"], "model_not_found");
  auto too_large = chat(chat_body(false, 1, ",\"pad\":\"" + std::string(4096, 'x') + "\""));
  EXPECT_EQ(too_large.status, 413);
  EXPECT_EQ(error_of(too_large)["code"], "request_too_large");
  auto wrong_method = get(harness.api_port(), "/v1/chat/completions");
  EXPECT_EQ(wrong_method.status, 405);
  auto unknown_path = get(harness.api_port(), "/admin");
  EXPECT_EQ(unknown_path.status, 404);
  // None of these reached a worker.
  for (const auto* id : {"u0", "u1"}) {
    EXPECT_EQ(json::parse(get(harness.upstream(id).port, "/control/stats").body)["requests"], 0);
  }
  // And the gateway still serves.
  EXPECT_EQ(chat().status, 200);
}

TEST_F(ProxyTest, OversizedChunkedBodyIs413AndMalformedHttpIs400) {
  start_two("limits: {max_body_size: 2KiB}\n");
  std::string chunk(3000, 'x');
  char size[16];
  std::snprintf(size, sizeof size, "%zx", chunk.size());
  auto answer = raw_exchange(harness.api_port(),
                             "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n" +
                                 std::string(size) + "\r\n" + chunk + "\r\n0\r\n\r\n");
  EXPECT_TRUE(answer.starts_with("HTTP/1.1 413")) << answer;
  auto garbage = raw_exchange(harness.api_port(), "HELLO?? /x\r\n\r\n");
  EXPECT_TRUE(garbage.starts_with("HTTP/1.1 400")) << garbage;
  EXPECT_NE(garbage.find("bad_http_request"), std::string::npos);
}

// Hostile shapes found by a user: a content nested 5,000 arrays deep and a
// request with 2,000 header fields. Neither reaches a replica, and the
// gateway serves the next request.
TEST_F(ProxyTest, DeeplyNestedBodiesAndFloodsOfHeadersAreRefused) {
  start_two();
  std::string content = std::string(5'000, '[') + "\"x\"" + std::string(5'000, ']');
  auto deep = chat(R"({"model":"test-model","messages":[{"role":"user","content":)" + content + "}]}");
  EXPECT_EQ(deep.status, 400);
  EXPECT_EQ(error_of(deep)["code"], "json_too_deep");
  auto deep_elsewhere =
      post_json(harness.api_port(), "/v1/embeddings", R"({"model":"test-model","input":)" + content + "}");
  EXPECT_EQ(deep_elsewhere.status, 400);
  EXPECT_EQ(error_of(deep_elsewhere)["code"], "json_too_deep");
  std::string headers;
  for (int field = 0; field < 2'000; ++field) {
    headers += "x-filler-" + std::to_string(field) + ": y\r\n";
  }
  auto body = chat_body();
  auto flood = raw_exchange(harness.api_port(), "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n" + headers +
                                                    "Content-Type: application/json\r\nContent-Length: " +
                                                    std::to_string(body.size()) + "\r\n\r\n" + body);
  EXPECT_TRUE(flood.starts_with("HTTP/1.1 431")) << flood.substr(0, 200);
  EXPECT_NE(flood.find("too_many_headers"), std::string::npos);
  for (const auto* id : {"u0", "u1"}) {
    EXPECT_EQ(json::parse(get(harness.upstream(id).port, "/control/stats").body)["requests"], 0) << id;
  }
  EXPECT_EQ(chat().status, 200);
}

// After a worker dies mid-stream the client gets one error event, [DONE]
// and the end of the chunked body: a well-formed response on a connection
// that said keep-alive, so the connection stays open for the next request.
TEST_F(ProxyTest, TheConnectionStaysOpenAfterAWellFormedEndOfAnInterruptedStream) {
  start_two();
  auto streamed = chat_body(true, 10);
  auto plain = chat_body();
  auto answer = raw_exchange(harness.api_port(),
                             "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nx-test-fault: drop_after:2\r\n"
                             "Content-Type: application/json\r\nContent-Length: " +
                                 std::to_string(streamed.size()) + "\r\n\r\n" + streamed +
                                 "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
                                 "Content-Type: application/json\r\nContent-Length: " +
                                 std::to_string(plain.size()) + "\r\n\r\n" + plain);
  auto first_end = answer.find("upstream_stream_interrupted");
  ASSERT_NE(first_end, std::string::npos) << answer;
  auto second = answer.find("HTTP/1.1 200", first_end);
  EXPECT_NE(second, std::string::npos) << answer;
  EXPECT_NE(answer.find("chat.completion", second), std::string::npos);
}

TEST_F(ProxyTest, ChunkedRequestBodyIsForwardedWhole) {
  start_two();
  auto body = chat_body();
  char size[16];
  std::snprintf(size, sizeof size, "%zx", body.size());
  auto answer = raw_exchange(harness.api_port(),
                             "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
                             "Transfer-Encoding: chunked\r\n\r\n" +
                                 std::string(size) + "\r\n" + body + "\r\n0\r\n\r\n");
  ASSERT_TRUE(answer.starts_with("HTTP/1.1 200")) << answer;
  auto worker = answer.find("x-kvgate-worker: u0") != std::string::npos ? "u0" : "u1";
  auto seen = json::parse(get(harness.upstream(worker).port, "/control/last_request").body);
  EXPECT_EQ(seen["body"], body);
  EXPECT_EQ(seen["headers"]["Content-Length"], std::to_string(body.size()));
}

TEST_F(ProxyTest, ModelsAreListedFromTheConfig) {
  start_two();
  auto response = get(harness.api_port(), "/v1/models");
  ASSERT_EQ(response.status, 200);
  auto body = json::parse(response.body);
  EXPECT_EQ(body["object"], "list");
  ASSERT_EQ(body["data"].size(), 1u);
  EXPECT_EQ(body["data"][0]["id"], "test-model");
}

TEST_F(ProxyTest, OtherV1PathsAreForwardedToAWorker) {
  start_two();
  auto response = get(harness.api_port(), "/v1/files");
  EXPECT_EQ(response.status, 404);  // the upstream's own answer
  EXPECT_FALSE(response.header("x-kvgate-worker").empty());
  EXPECT_NE(response.body.find("no route /v1/files"), std::string::npos);
}

TEST_F(ProxyTest, ApiKeysAreEnforcedWhenConfigured) {
  start_two("api_keys: [\"secret\"]\n");
  auto missing = chat();
  EXPECT_EQ(missing.status, 401);
  EXPECT_EQ(error_of(missing)["type"], "authentication_error");
  EXPECT_EQ(chat(chat_body(), {{"authorization", "Bearer wrong"}}).status, 401);
  EXPECT_EQ(chat(chat_body(), {{"authorization", "Bearer secret"}}).status, 200);
}

TEST_F(ProxyTest, LeastLoadAvoidsTheBusyWorker) {
  start_two("routing: {policy: least_load}\n");
  EventStream busy(harness.api_port(), "/v1/chat/completions", chat_body(true, 10), {{"x-test-fault", "hold_after:1"}});
  auto busy_worker = busy.header("x-kvgate-worker");
  for (int index = 0; index < 3; ++index) {
    auto response = chat();
    ASSERT_EQ(response.status, 200);
    EXPECT_NE(response.header("x-kvgate-worker"), busy_worker);
  }
  post_json(harness.upstream(busy_worker).port, "/control/release", "{}");
  EXPECT_EQ(busy.rest().back(), "[DONE]");
}

TEST_F(ProxyTest, KeepAliveConnectionsServeManyRequests) {
  start_two();
  std::string requests;
  for (int index = 0; index < 3; ++index) {
    // A stream first: its chunked ending must leave the connection clean.
    auto body = chat_body(index == 0);
    requests += "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n";
    requests += index == 2 ? "Connection: close\r\n" : "";
    requests += "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
  }
  auto answer = raw_exchange(harness.api_port(), requests);
  std::size_t responses = 0;
  for (auto at = answer.find("HTTP/1.1 200"); at != std::string::npos; at = answer.find("HTTP/1.1 200", at + 1)) {
    ++responses;
  }
  EXPECT_EQ(responses, 3u) << answer;
  EXPECT_EQ(answer.find("0\r\n\r\n0\r\n\r\n"), std::string::npos) << answer;
}

TEST_F(ProxyTest, PooledConnectionsToARestartedWorkerAreReplacedTransparently) {
  harness.start_upstream("u0");
  harness.start_gateway("upstream: {retries: 0}\nhealth_check: {interval: 1h}\n", harness.models_for_upstreams());
  // Several connections end up pooled on each I/O thread.
  for (int index = 0; index < 6; ++index) {
    ASSERT_EQ(chat().status, 200);
  }
  harness.restart_upstream("u0");
  // Every pooled connection is now dead; with no retries allowed, each
  // request still succeeds because stale connections are detected and
  // replaced on the same worker.
  for (int index = 0; index < 6; ++index) {
    auto response = chat();
    EXPECT_EQ(response.status, 200) << response.body;
  }
  // Every upstream-error series exists from the start, at 0, and stays there.
  auto metrics = get(harness.admin_port(), "/metrics").body;
  std::size_t series = 0;
  for (auto at = metrics.find("\nkvgate_upstream_errors_total{"); at != std::string::npos;
       at = metrics.find("\nkvgate_upstream_errors_total{", at + 1)) {
    ++series;
    EXPECT_EQ(std::stod(metrics.substr(metrics.find("} ", at) + 2)), 0) << metrics.substr(at, 80);
  }
  EXPECT_GT(series, 0u) << metrics;
}

}  // namespace
}  // namespace kvgate::testing
