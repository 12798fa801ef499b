// Reliability end to end: kvgate in front of real replica processes
// (kvgate-sim, ports that refuse connections). A replica that keeps failing
// is ejected, kept out while ejected and probed back in; a fleet that fails
// as a whole is not hit by a retry storm.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <thread>

#include "support/admin.hpp"
#include "support/harness.hpp"
#include "support/sim_process.hpp"

namespace kvgate::testing {
namespace {

using nlohmann::json;
using namespace std::chrono_literals;

std::string completion() {
  return json{{"model", "sim-model"}, {"prompt", "hello there"}, {"max_tokens", 2}}.dump();
}

TEST(Reliability, AFailingReplicaIsEjectedKeptOutAndProbedBackIn) {
  Harness harness;
  SimProcess a(harness, {}, "a");
  SimProcess b(harness, {}, "b");
  SimProcess c(harness, {}, "c");
  harness.start_gateway(
      "routing: {policy: round_robin}\nhealth_check: {interval: 1h}\n"
      "outlier_detection: {consecutive_failures: 3, base_ejection_time: 700ms, max_ejection_time: 10s}\n",
      "models:\n  - name: \"sim-model\"\n    workers:\n      - {id: a, url: \"" + a.url() +
          "\"}\n      - {id: b, url: \"" + b.url() + "\"}\n      - {id: c, url: \"" + c.url() + "\"}\n");
  b.fault({{"mode", "status"}, {"status", 500}});
  // Round robin sends every third request to b, which answers 500 (relayed
  // as it is: the engine's answer); the third in a row ejects it.
  int server_errors = 0;
  for (int request = 0; request < 30 && worker_state(harness, "b")["outlier"]["state"] != "open"; ++request) {
    auto response = post_json(harness.api_port(), "/v1/completions", completion());
    server_errors += response.status == 500 ? 1 : 0;
  }
  auto ejected = worker_state(harness, "b")["outlier"];
  ASSERT_EQ(ejected["state"], "open") << ejected.dump();
  EXPECT_EQ(server_errors, 3);
  EXPECT_EQ(ejected["last_cause"], "status_5xx");
  EXPECT_EQ(ejected["ejections"], 1);
  EXPECT_EQ(metric_value(harness, "kvgate_worker_ejections_total{cause=\"status_5xx\",worker=\"b\"}"), 1);
  EXPECT_EQ(metric_value(harness, "kvgate_worker_ejected{worker=\"b\"}"), 1);
  // While ejected nothing goes to b, and nothing fails.
  for (int request = 0; request < 6 && worker_state(harness, "b")["outlier"]["state"] == "open"; ++request) {
    auto response = post_json(harness.api_port(), "/v1/completions", completion());
    EXPECT_EQ(response.status, 200);
    EXPECT_NE(response.header("x-kvgate-worker"), "b");
  }
  // Recovered; once the ejection time is over b takes traffic again, and its
  // first answer closes the breaker.
  b.fault({{"mode", "none"}});
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  while (worker_state(harness, "b")["outlier"]["state"] == "open") {
    ASSERT_LT(std::chrono::steady_clock::now(), deadline);
    std::this_thread::sleep_for(50ms);
  }
  bool probed = false;
  for (int request = 0; request < 6 && !probed; ++request) {
    auto response = post_json(harness.api_port(), "/v1/completions", completion());
    EXPECT_EQ(response.status, 200);
    probed = response.header("x-kvgate-worker") == "b";
  }
  ASSERT_TRUE(probed);
  // The gateway records the outcome once the response is written: the
  // client may read it a moment before the breaker closes.
  EXPECT_TRUE(eventually([&] { return worker_state(harness, "b")["outlier"]["state"] == "closed"; }))
      << worker_state(harness, "b").dump();
  EXPECT_EQ(metric_value(harness, "kvgate_worker_ejected{worker=\"b\"}"), 0);
  harness.gateway().stop();
  const auto log = harness.gateway().stderr_text();
  EXPECT_NE(log.find("worker b ejected for"), std::string::npos);
  EXPECT_NE(log.find("worker b answered its probe"), std::string::npos);
}

TEST(Reliability, AFleetThatFailsAsAWholeIsNotHitByARetryStorm) {
  Harness harness;
  RefusingPort first;
  RefusingPort second;
  RefusingPort third;
  // Two retries per request would be 80 retries for 40 requests; the budget
  // allows a tenth of the requests plus 5 per 10 s, per I/O thread (the
  // harness runs two): at most 4 + 2 x 5.
  harness.start_gateway(
      "health_check: {enabled: false}\noutlier_detection: {consecutive_failures: 0}\n"
      "upstream: {retries: 2, retry_budget: {ratio: 0.1, min_retries_per_second: 0.5}}\n",
      Harness::models_yaml({{"a", "http://127.0.0.1:" + std::to_string(first.port())},
                            {"b", "http://127.0.0.1:" + std::to_string(second.port())},
                            {"c", "http://127.0.0.1:" + std::to_string(third.port())}}));
  for (int request = 0; request < 40; ++request) {
    auto response = post_json(harness.api_port(), "/v1/chat/completions",
                              R"({"model":"test-model","messages":[{"role":"user","content":"hi"}]})");
    ASSERT_EQ(response.status, 502) << response.body;
    EXPECT_EQ(json::parse(response.body)["error"]["code"], "upstream_error");
  }
  const auto retries = metric_value(harness, "kvgate_retries_total{model=\"test-model\"}");
  const auto denied = metric_value(harness, "kvgate_retries_denied_total{model=\"test-model\"}");
  EXPECT_GE(retries, 5);
  EXPECT_LE(retries, 14);
  EXPECT_GE(denied, 26);
}

}  // namespace
}  // namespace kvgate::testing
