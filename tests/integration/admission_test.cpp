// Admission control end to end, in front of kvgate-test-upstream replicas
// that hold streams on request: the in-flight limits, the fair queue across
// tenants, its bounds (429 queue_full, queue_timeout) and the per-tenant
// rate limits, each with Retry-After in OpenAI's error shape.
#include <gtest/gtest.h>

#include <future>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "kvgate/crypto/digest.hpp"
#include "support/admin.hpp"
#include "support/harness.hpp"

namespace kvgate::testing {
namespace {

using nlohmann::json;
using namespace std::chrono_literals;

std::string tenant_yaml(const std::string& name, const std::string& key, const std::string& extra = "") {
  return "  - {name: " + name + ", api_key_sha256: '" + crypto::to_hex(crypto::sha256(key)) + "'" + extra + "}\n";
}

Headers as(const std::string& key) {
  return {{"authorization", "Bearer " + key}};
}

class Admission : public ::testing::Test {
 protected:
  void start(const std::string& settings, int upstreams = 1) {
    for (int index = 0; index < upstreams; ++index) {
      harness.start_upstream("u" + std::to_string(index));
    }
    harness.start_gateway(settings, harness.models_for_upstreams());
  }
  HttpResponse chat(const Headers& headers = {}, const std::string& body = chat_body()) {
    return post_json(harness.api_port(), "/v1/chat/completions", body, headers);
  }
  // A stream the upstream holds after its first event: it keeps its slot
  // until release().
  std::unique_ptr<EventStream> hold(Headers headers = {}) {
    headers.emplace_back("x-test-fault", "hold_after:1");
    auto stream =
        std::make_unique<EventStream>(harness.api_port(), "/v1/chat/completions", chat_body(true, 5), headers);
    EXPECT_EQ(stream->status(), 200);
    EXPECT_TRUE(stream->next_event());
    return stream;
  }
  void release_all() {
    for (const auto& [id, port] : upstream_ports()) {
      post_json(port, "/control/release", "{}");
    }
  }
  std::vector<std::pair<std::string, int>> upstream_ports() {
    std::vector<std::pair<std::string, int>> ports;
    for (int index = 0;; ++index) {
      try {
        auto& upstream = harness.upstream("u" + std::to_string(index));
        ports.emplace_back("u" + std::to_string(index), upstream.port);
      } catch (const std::out_of_range&) {
        return ports;
      }
    }
  }
  void wait_queue_length(double length) {
    ASSERT_TRUE(eventually([&] { return metric_value(harness, "kvgate_admission_queue_length") == length; }))
        << "queue length never reached " << length;
  }
  static json error_of(const HttpResponse& response) { return json::parse(response.body)["error"]; }

  Harness harness;
};

TEST_F(Admission, BeyondTheLimitRequestsWaitAndBeyondTheQueueGet429) {
  start("admission: {max_in_flight: 1, queue: {max_length: 1, max_wait: 30s}}\n");
  auto held = hold();
  auto queued = std::async(std::launch::async, [&] { return chat(); });
  wait_queue_length(1);
  EXPECT_EQ(metric_value(harness, "kvgate_admission_admitted"), 1);
  auto refused = chat();
  EXPECT_EQ(refused.status, 429) << refused.body;
  EXPECT_EQ(error_of(refused)["code"], "queue_full");
  EXPECT_EQ(refused.header("retry-after"), "1");
  EXPECT_EQ(metric_value(harness, R"(kvgate_admission_rejections_total{reason="queue_full",tenant="anonymous"})"), 1);
  // The slot the held stream frees goes to the waiter.
  EXPECT_EQ(queued.wait_for(200ms), std::future_status::timeout);
  release_all();
  EXPECT_EQ(held->rest().back(), "[DONE]");
  auto served = queued.get();
  EXPECT_EQ(served.status, 200) << served.body;
  wait_queue_length(0);
  EXPECT_TRUE(eventually([&] { return metric_value(harness, "kvgate_admission_admitted") == 0; }));
}

TEST_F(Admission, NoSlotWithinTheMaximumWaitIs429QueueTimeout) {
  start("admission: {max_in_flight: 1, queue: {max_length: 8, max_wait: 300ms}}\n");
  auto held = hold();
  const auto started = std::chrono::steady_clock::now();
  auto refused = chat();
  EXPECT_GE(std::chrono::steady_clock::now() - started, 300ms);
  EXPECT_EQ(refused.status, 429) << refused.body;
  EXPECT_EQ(error_of(refused)["code"], "queue_timeout");
  EXPECT_EQ(error_of(refused)["type"], "requests");
  EXPECT_FALSE(refused.header("retry-after").empty());
  wait_queue_length(0);
  release_all();
  EXPECT_EQ(held->rest().back(), "[DONE]");
  EXPECT_EQ(chat().status, 200);  // the slot came back
}

TEST_F(Admission, ABurstFromOneTenantDoesNotDelayAnotherTenantsRequest) {
  start("admission: {max_in_flight: 1, queue: {max_length: 64, max_wait: 30s}}\ntenants:\n" +
        tenant_yaml("busy", "busy-key") + tenant_yaml("quiet", "quiet-key"));
  auto held = hold(as("busy-key"));
  std::vector<std::future<HttpResponse>> burst;
  for (int index = 0; index < 4; ++index) {
    burst.push_back(std::async(std::launch::async, [&] { return chat(as("busy-key")); }));
    wait_queue_length(index + 1);
  }
  auto quiet = std::async(std::launch::async, [&] { return chat(as("quiet-key")); });
  wait_queue_length(5);
  release_all();
  EXPECT_EQ(held->rest().back(), "[DONE]");
  // The upstream numbers the requests it receives (its completion ids):
  // the quiet tenant's is served right after the burst's first, not last.
  auto order_of = [](const HttpResponse& response) {
    const auto id = json::parse(response.body)["id"].get<std::string>();
    return std::stoi(id.substr(id.rfind('-') + 1));
  };
  const auto quiet_response = quiet.get();
  ASSERT_EQ(quiet_response.status, 200) << quiet_response.body;
  std::vector<int> busy_order;
  for (auto& request : burst) {
    auto response = request.get();
    ASSERT_EQ(response.status, 200) << response.body;
    busy_order.push_back(order_of(response));
  }
  std::sort(busy_order.begin(), busy_order.end());
  // Request 1 was the held stream; then busy, quiet, busy, busy, busy.
  EXPECT_EQ(order_of(quiet_response), 3) << "busy ones: " << busy_order[0] << " " << busy_order[3];
  EXPECT_EQ(busy_order, (std::vector<int>{2, 4, 5, 6}));
}

TEST_F(Admission, PerTenantRateLimitsAnswer429WithRetryAfter) {
  start("tenants:\n" + tenant_yaml("capped", "capped-key", ", limits: {requests_per_minute: 2}") +
        tenant_yaml("frugal", "frugal-key", ", limits: {prompt_tokens_per_minute: 30}") +
        tenant_yaml("free", "free-key"));
  EXPECT_EQ(chat(as("capped-key")).status, 200);
  EXPECT_EQ(chat(as("capped-key")).status, 200);
  auto capped = chat(as("capped-key"));
  EXPECT_EQ(capped.status, 429) << capped.body;
  EXPECT_EQ(error_of(capped)["code"], "rate_limit_exceeded");
  EXPECT_EQ(error_of(capped)["type"], "requests");
  // Two a minute: the next one in about 30 s.
  const auto retry_after = std::stoi(capped.header("retry-after"));
  EXPECT_GE(retry_after, 25);
  EXPECT_LE(retry_after, 31);
  // A prompt larger than the whole allowance goes once, alone; the next waits.
  const std::string long_prompt(400, 'x');
  const auto big = json{{"model", "test-model"},
                        {"max_tokens", 2},
                        {"messages", json::array({{{"role", "user"}, {"content", long_prompt}}})}}
                       .dump();
  EXPECT_EQ(chat(as("frugal-key"), big).status, 200);
  auto frugal = chat(as("frugal-key"), big);
  EXPECT_EQ(frugal.status, 429) << frugal.body;
  EXPECT_EQ(error_of(frugal)["type"], "tokens");
  // Nobody else pays for it.
  for (int index = 0; index < 5; ++index) {
    EXPECT_EQ(chat(as("free-key")).status, 200);
  }
  EXPECT_EQ(metric_value(harness, R"(kvgate_admission_rejections_total{reason="requests_per_minute",tenant="capped"})"),
            1);
  EXPECT_EQ(
      metric_value(harness, R"(kvgate_admission_rejections_total{reason="prompt_tokens_per_minute",tenant="frugal"})"),
      1);
}

TEST_F(Admission, AWorkerAtItsLimitTakesNothingNewAndTheRestWaits) {
  // session_hash would send one session's turns to one worker; the limit
  // sends the second elsewhere and queues the third.
  start("routing: {policy: session_hash}\nadmission: {max_in_flight_per_worker: 1, queue: {max_wait: 30s}}\n", 2);
  const Headers session{{"x-session-id", "one-session"}};
  auto first = hold(session);
  auto second = hold(session);
  EXPECT_NE(first->header("x-kvgate-worker"), second->header("x-kvgate-worker"));
  auto third = std::async(std::launch::async, [&] { return chat(session); });
  wait_queue_length(1);
  release_all();
  EXPECT_EQ(first->rest().back(), "[DONE]");
  EXPECT_EQ(second->rest().back(), "[DONE]");
  EXPECT_EQ(third.get().status, 200);
}

TEST_F(Admission, AClientThatLeavesTheQueueFreesItsPlace) {
  start("admission: {max_in_flight: 1, queue: {max_length: 1, max_wait: 30s}}\n");
  auto held = hold();
  // A client that sends its request, reads for a second, and hangs up.
  const auto body = chat_body(true, 2);
  auto leaving = std::async(std::launch::async, [&] {
    return raw_exchange(harness.api_port(),
                        "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                        "Content-Length: " +
                            std::to_string(body.size()) + "\r\n\r\n" + body,
                        1s);
  });
  wait_queue_length(1);
  EXPECT_EQ(leaving.get(), "");  // nothing was answered while it waited
  wait_queue_length(0);
  EXPECT_TRUE(eventually([&] {
    return metric_value(harness, R"(kvgate_admission_rejections_total{reason="abandoned",tenant="anonymous"})") == 1;
  }));
  // Its place is free again: another request can wait there.
  auto queued = std::async(std::launch::async, [&] { return chat(); });
  wait_queue_length(1);
  release_all();
  EXPECT_EQ(held->rest().back(), "[DONE]");
  EXPECT_EQ(queued.get().status, 200);
}

TEST_F(Admission, APipelinedRequestBehindAQueuedOneDoesNotCutItsWaitShort) {
  start("admission: {max_in_flight: 1, queue: {max_length: 4, max_wait: 30s}}\n");
  auto held = hold();
  const auto body = chat_body();
  std::string request =
      "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
      "Content-Length: " +
      std::to_string(body.size()) + "\r\n\r\n" + body;
  auto answers =
      std::async(std::launch::async, [&] { return raw_exchange(harness.api_port(), request + request, 3s); });
  wait_queue_length(1);
  std::this_thread::sleep_for(300ms);  // long enough for a wrongly woken waiter to have answered
  EXPECT_EQ(metric_value(harness, "kvgate_admission_queue_length"), 1);
  release_all();
  EXPECT_EQ(held->rest().back(), "[DONE]");
  const auto text = answers.get();
  std::size_t ok = 0;
  for (auto at = text.find("HTTP/1.1 200"); at != std::string::npos; at = text.find("HTTP/1.1 200", at + 1)) {
    ++ok;
  }
  EXPECT_EQ(ok, 2u) << text;
  EXPECT_EQ(text.find("HTTP/1.1 429"), std::string::npos) << text;
}

}  // namespace
}  // namespace kvgate::testing
