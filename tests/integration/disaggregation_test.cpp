// A disaggregated fleet through the gateway: kvgate-sim replicas playing
// prefill and decode workers under vLLM's protocol (prefill first, its
// kv_transfer_params to the decoder) and SGLang's (both at once, a
// bootstrap room), streaming and not, and every failure the phases can
// meet: a prefill worker that refuses, dies or stalls, a decoder that fails
// before its first token, a client that leaves. Nothing is lost.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <future>
#include <nlohmann/json.hpp>
#include <set>
#include <thread>

#include "support/admin.hpp"
#include "support/harness.hpp"
#include "support/sim_process.hpp"

namespace kvgate::testing {
namespace {

using nlohmann::json;
using namespace std::chrono_literals;

enum class Protocol { vllm, sglang };

std::string protocol_name(Protocol protocol) {
  return protocol == Protocol::vllm ? "vllm" : "sglang";
}

// A sim's own counter, summed over its series (0 when absent).
double sim_counter(const SimProcess& sim, const std::string& name) {
  const auto text = get(sim.port(), "/metrics").body;
  double total = 0;
  for (auto at = text.find("\n" + name + "{"); at != std::string::npos; at = text.find("\n" + name + "{", at + 1)) {
    total += std::stod(text.substr(text.find("} ", at) + 2));
  }
  return total;
}

// p1, p2 prefill; d1, d2 decode.
class PdFleet {
 public:
  explicit PdFleet(Protocol protocol, int prefill_workers = 2) : protocol_(protocol) {
    std::vector<std::string> profile{"--engine-profile", protocol_name(protocol)};
    for (int index = 1; index <= prefill_workers; ++index) {
      auto flags = profile;
      flags.insert(flags.end(), {"--role", "prefill"});
      prefill.push_back(std::make_unique<SimProcess>(harness, flags, "p" + std::to_string(index)));
    }
    for (int index = 1; index <= 2; ++index) {
      auto flags = profile;
      flags.insert(flags.end(), {"--role", "decode"});
      decode.push_back(std::make_unique<SimProcess>(harness, flags, "d" + std::to_string(index)));
    }
  }

  void start_gateway(const std::string& settings = "") {
    std::string yaml = "models:\n  - name: sim-model\n    disaggregation: {protocol: " + protocol_name(protocol_) +
                       ", local_prefill_tokens: 64}\n    workers:\n";
    const std::string engine = protocol_ == Protocol::sglang ? ", engine: sglang" : "";
    for (std::size_t index = 0; index < prefill.size(); ++index) {
      yaml += "      - {id: p" + std::to_string(index + 1) + ", url: \"" + prefill[index]->url() + "\", role: prefill" +
              engine + ", bootstrap_port: " + std::to_string(prefill[index]->port()) + "}\n";
    }
    for (std::size_t index = 0; index < decode.size(); ++index) {
      yaml += "      - {id: d" + std::to_string(index + 1) + ", url: \"" + decode[index]->url() + "\", role: decode" +
              engine + "}\n";
    }
    harness.start_gateway("routing: {receipt: true}\n" + settings, yaml);
  }

  double prefills_done() const {
    double total = 0;
    for (const auto& sim : prefill) {
      total += sim_counter(*sim, "kvgate_sim_remote_prefills_total");
    }
    return total;
  }
  double transfers() const {
    double total = 0;
    for (const auto& sim : decode) {
      total += sim_counter(*sim, "kvgate_sim_kv_transfers_total");
    }
    return total;
  }

  Harness harness;
  std::vector<std::unique_ptr<SimProcess>> prefill;
  std::vector<std::unique_ptr<SimProcess>> decode;

 private:
  Protocol protocol_;
};

// A long prompt nobody has seen (far over local_prefill_tokens).
json long_messages(const std::string& topic) {
  std::string text;
  for (int word = 0; word < 120; ++word) {
    text += topic + std::to_string(word) + " ";
  }
  return json::array({{{"role", "user"}, {"content", text}}});
}

std::string chat(const json& messages, bool stream, int max_tokens = 3) {
  json body{{"model", "sim-model"}, {"messages", messages}, {"max_tokens", max_tokens}};
  if (stream) {
    body["stream"] = true;
    body["stream_options"] = {{"include_usage", true}};
  }
  return body.dump();
}

const std::set<std::string> kDecoders{"d1", "d2"};
const std::set<std::string> kPrefillWorkers{"p1", "p2"};

class Disaggregation : public ::testing::TestWithParam<Protocol> {};

TEST_P(Disaggregation, ALongPromptIsPrefilledOnAPrefillWorkerAndDecodedOnADecoder) {
  PdFleet fleet(GetParam());
  fleet.start_gateway();
  const auto port = fleet.harness.api_port();

  const auto messages = long_messages("alpha");
  auto whole = post_json(port, "/v1/chat/completions", chat(messages, false));
  ASSERT_EQ(whole.status, 200) << whole.body;
  EXPECT_TRUE(kDecoders.contains(whole.header("x-kvgate-worker")));
  EXPECT_TRUE(kPrefillWorkers.contains(whole.header("x-kvgate-prefill-worker"))) << whole.header("x-kvgate-route");
  EXPECT_EQ(whole.header("x-kvgate-sim-replica"), whole.header("x-kvgate-worker"));  // the decoder answered
  EXPECT_NE(whole.header("x-kvgate-route").find("prefill=remote_prefill"), std::string::npos);
  const auto answer = json::parse(whole.body);
  EXPECT_EQ(answer["choices"][0]["message"]["content"], "tok0 tok1 tok2 ");
  EXPECT_GT(answer["usage"]["prompt_tokens"].get<int>(), 64);
  EXPECT_EQ(fleet.prefills_done(), 1);
  EXPECT_EQ(fleet.transfers(), 1);

  // A stream, as the SDKs read it, with the decoder's usage.
  EventStream stream(port, "/v1/chat/completions", chat(long_messages("beta"), true, 4));
  ASSERT_EQ(stream.status(), 200);
  EXPECT_TRUE(kPrefillWorkers.contains(stream.header("x-kvgate-prefill-worker")));
  std::string text;
  json usage;
  const auto events = stream.until_done();
  ASSERT_FALSE(events.empty());
  EXPECT_EQ(events.back(), "[DONE]");
  for (const auto& event : events) {
    if (event == "[DONE]") {
      continue;
    }
    auto chunk = json::parse(event);
    if (!chunk["choices"].empty() && chunk["choices"][0]["delta"].contains("content")) {
      text += chunk["choices"][0]["delta"]["content"].get<std::string>();
    }
    if (chunk.contains("usage") && chunk["usage"].is_object()) {
      usage = chunk["usage"];
    }
  }
  EXPECT_EQ(text, "tok0 tok1 tok2 tok3 ");
  ASSERT_TRUE(usage.is_object());
  EXPECT_EQ(usage["completion_tokens"], 4);

  // The conversation's next turn: its decoder holds the history and
  // prefills the little that is new itself.
  auto next = messages;
  next.push_back({{"role", "assistant"}, {"content", "tok0 tok1 tok2 "}});
  next.push_back({{"role", "user"}, {"content", "and then?"}});
  auto second = post_json(port, "/v1/chat/completions", chat(next, false));
  ASSERT_EQ(second.status, 200) << second.body;
  EXPECT_EQ(second.header("x-kvgate-worker"), whole.header("x-kvgate-worker"));
  EXPECT_EQ(second.header("x-kvgate-prefill-worker"), "");
  EXPECT_NE(second.header("x-kvgate-route").find("prefill=local_prefill"), std::string::npos)
      << second.header("x-kvgate-route");
  EXPECT_EQ(
      metric_value(fleet.harness, R"(kvgate_prefill_placements_total{model="sim-model",placement="local_prefill"})"),
      1);
  EXPECT_EQ(worker_state(fleet.harness, "p1")["role"], "prefill");
  EXPECT_EQ(worker_state(fleet.harness, "d2")["role"], "decode");
  // A session's turn names both workers.
  auto keyed =
      post_json(port, "/v1/chat/completions", chat(long_messages("kappa"), false), {{"x-session-id", "pd-session"}});
  ASSERT_EQ(keyed.status, 200) << keyed.body;
  const auto session = json::parse(get(fleet.harness.admin_port(), "/debug/sessions/pd-session").body);
  ASSERT_TRUE(session.contains("turns") && !session["turns"].empty()) << session.dump();
  EXPECT_EQ(session["turns"][0]["prefill"], "remote_prefill");
  EXPECT_EQ(session["turns"][0]["prefill_worker"], keyed.header("x-kvgate-prefill-worker"));
  EXPECT_EQ(session["turns"][0]["worker"], keyed.header("x-kvgate-worker"));
  // The status page shows each worker's role and the request's two workers.
  const auto page = get(fleet.harness.admin_port(), "/").body;
  EXPECT_NE(page.find("<th>role</th>"), std::string::npos);
  EXPECT_NE(page.find("<td>" + keyed.header("x-kvgate-worker") +
                      " (prefill: " + keyed.header("x-kvgate-prefill-worker") + ")</td>"),
            std::string::npos)
      << page;
}

TEST_P(Disaggregation, APrefillWorkerThatRefusesIsReplacedAndWithoutAnyTheDecoderPrefills) {
  PdFleet fleet(GetParam());
  // Placing a failed prefill again is not a retry: none are allowed here.
  fleet.start_gateway("health_check: {interval: 60s}\nupstream: {retries: 0}\n");
  const auto port = fleet.harness.api_port();
  fleet.prefill[0]->fault({{"mode", "status"}, {"status", 503}});
  for (int request = 0; request < 6; ++request) {
    auto response =
        post_json(port, "/v1/chat/completions", chat(long_messages("gamma" + std::to_string(request)), false));
    ASSERT_EQ(response.status, 200) << response.body;
    EXPECT_EQ(response.header("x-kvgate-prefill-worker"), "p2") << response.header("x-kvgate-route");
  }
  fleet.prefill[1]->fault({{"mode", "status"}, {"status", 503}});
  for (int request = 0; request < 4; ++request) {
    auto response =
        post_json(port, "/v1/chat/completions", chat(long_messages("delta" + std::to_string(request)), false));
    ASSERT_EQ(response.status, 200) << response.body;
    EXPECT_EQ(response.header("x-kvgate-prefill-worker"), "");
    EXPECT_TRUE(kDecoders.contains(response.header("x-kvgate-worker")));
  }
  EXPECT_GE(metric_value(fleet.harness, R"(kvgate_prefill_failures_total{model="sim-model"})"), 2);
  EXPECT_GE(metric_value(fleet.harness,
                         R"(kvgate_prefill_placements_total{model="sim-model",placement="prefill_unavailable"})"),
            1);
}

// Under SGLang's protocol a decoder whose room's KV never came fails, and
// its answer may reach the gateway before the failing prefill worker's own:
// the prefill worker's answer says whose failure it was. p1 refuses slowly
// (its bootstrap server at once), so every decoder fails first.
TEST_P(Disaggregation, APrefillWorkerThatFailsAfterItsDecoderIsTheOneReplaced) {
  PdFleet fleet(GetParam());
  fleet.start_gateway("health_check: {interval: 60s}\nupstream: {retries: 0}\n");
  const auto port = fleet.harness.api_port();
  fleet.prefill[0]->fault({{"mode", "status"}, {"status", 503}, {"delay_ms", 300}});
  for (int request = 0; request < 4; ++request) {
    auto response =
        post_json(port, "/v1/chat/completions", chat(long_messages("zeta" + std::to_string(request)), request % 2));
    ASSERT_EQ(response.status, 200) << response.body;
    EXPECT_EQ(response.header("x-kvgate-prefill-worker"), "p2") << response.header("x-kvgate-route");
  }
  EXPECT_GE(metric_value(fleet.harness, R"(kvgate_prefill_failures_total{model="sim-model"})"), 1);
  // The decoders were not blamed: nothing was retried.
  EXPECT_EQ(metric_value(fleet.harness, R"(kvgate_retries_total{model="sim-model"})"), 0);
}

TEST_P(Disaggregation, ADecoderThatFailsBeforeItsFirstTokenIsRetriedWithANewPrefill) {
  PdFleet fleet(GetParam());
  fleet.start_gateway("health_check: {interval: 60s}\n");
  const auto port = fleet.harness.api_port();
  fleet.decode[0]->fault({{"mode", "status"}, {"status", 500}});
  for (int request = 0; request < 6; ++request) {
    auto response = post_json(port, "/v1/chat/completions", chat(long_messages("eps" + std::to_string(request)), true));
    ASSERT_EQ(response.status, 200) << response.body;
    EXPECT_EQ(response.header("x-kvgate-worker"), "d2");
    EXPECT_NE(response.body.find("[DONE]"), std::string::npos);
  }
  // The failed decoder was tried, and its requests prefilled again for d2
  // (under SGLang's protocol the first prefill may be stopped before it ends).
  EXPECT_GE(metric_value(fleet.harness, R"(kvgate_retries_total{model="sim-model"})"), 1);
  EXPECT_GE(fleet.prefills_done(), 6);
  EXPECT_EQ(sim_counter(*fleet.decode[0], "kvgate_sim_kv_transfers_total"), 0);
}

TEST_P(Disaggregation, AClientThatLeavesCancelsBothPhases) {
  PdFleet fleet(GetParam());
  fleet.start_gateway();
  const auto port = fleet.harness.api_port();
  for (auto& sim : fleet.prefill) {
    sim->fault({{"mode", "slow"}, {"factor", 100000}});  // a prefill that would take minutes
  }
  {
    // No response header comes before the prefill ends: the client sends
    // its request on a raw socket and closes it while the prefill runs.
    const auto body = chat(long_messages("zeta"), true);
    const std::string request =
        "POST /v1/chat/completions HTTP/1.1\r\nHost: kvgate\r\nContent-Type: "
        "application/json\r\nContent-Length: " +
        std::to_string(body.size()) + "\r\n\r\n" + body;
    const int client = ::socket(AF_INET, SOCK_STREAM, 0);
    ASSERT_GE(client, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_port = htons(static_cast<std::uint16_t>(port));
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ASSERT_EQ(::connect(client, reinterpret_cast<sockaddr*>(&address), sizeof address), 0);
    ASSERT_EQ(::send(client, request.data(), request.size(), 0), static_cast<ssize_t>(request.size()));
    const bool prefilling = eventually([&] {
      return worker_state(fleet.harness, "p1")["in_flight"] == 1 || worker_state(fleet.harness, "p2")["in_flight"] == 1;
    });
    ::close(client);
    ASSERT_TRUE(prefilling);
  }
  // Both phases end: the gateway releases both workers, and the prefill
  // worker's engine aborts the request.
  for (const char* id : {"p1", "p2", "d1", "d2"}) {
    EXPECT_TRUE(eventually([&] { return worker_state(fleet.harness, id)["in_flight"] == 0; })) << id;
  }
  const std::string running = GetParam() == Protocol::vllm ? "vllm:num_requests_running" : "sglang:num_running_reqs";
  for (auto& sim : fleet.prefill) {
    EXPECT_TRUE(eventually([&] {
      const auto text = get(sim->port(), "/metrics").body;
      return text.find(running + "{model_name=\"sim-model\",engine=\"0\"} 0\n") != std::string::npos;
    }));
  }
  // The gateway still serves.
  for (auto& sim : fleet.prefill) {
    sim->fault({{"mode", "none"}});
  }
  EXPECT_EQ(post_json(port, "/v1/chat/completions", chat(long_messages("eta"), false)).status, 200);
}

INSTANTIATE_TEST_SUITE_P(Protocols, Disaggregation, ::testing::Values(Protocol::vllm, Protocol::sglang),
                         [](const auto& info) { return protocol_name(info.param); });

// A prefill worker that dies with the request, or stalls past
// timeouts.prefill_response: the decoder prefills instead.
TEST(DisaggregationFailures, APrefillWorkerThatDiesOrStallsIsReplacedByTheDecoder) {
  PdFleet fleet(Protocol::vllm, 1);
  fleet.start_gateway("health_check: {interval: 60s}\ntimeouts: {prefill_response: 500ms}\n");
  const auto port = fleet.harness.api_port();
  fleet.prefill[0]->fault({{"mode", "hang"}});
  auto stalled = post_json(port, "/v1/chat/completions", chat(long_messages("theta"), false));
  ASSERT_EQ(stalled.status, 200) << stalled.body;
  EXPECT_EQ(stalled.header("x-kvgate-prefill-worker"), "");
  EXPECT_NE(stalled.header("x-kvgate-route").find("prefill=prefill_unavailable"), std::string::npos);

  auto pending = std::async(std::launch::async,
                            [&] { return post_json(port, "/v1/chat/completions", chat(long_messages("iota"), true)); });
  ASSERT_TRUE(eventually([&] { return worker_state(fleet.harness, "p1")["in_flight"] == 1; }));
  fleet.prefill[0]->kill_hard();
  auto died = pending.get();
  ASSERT_EQ(died.status, 200) << died.body;
  EXPECT_NE(died.body.find("[DONE]"), std::string::npos);
  EXPECT_TRUE(kDecoders.contains(died.header("x-kvgate-worker")));
  EXPECT_GE(metric_value(fleet.harness, R"(kvgate_prefill_failures_total{model="sim-model"})"), 2);
}

}  // namespace
}  // namespace kvgate::testing
