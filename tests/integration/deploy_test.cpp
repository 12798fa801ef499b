// What ships in deploy/ matches the daemon: every metric the Grafana
// dashboard and the Prometheus alert rules query exists in a live
// gateway's /metrics, with the labels the queries select on. The gateways
// run in front of real kvgate-sim replicas and are driven into the states
// the alerts are about (a refused worker, a retry budget spent, a full
// connection limit, event-stream gaps, an engine restart, undecodable
// events, a worker down), because a family without samples is not exposed.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>
#include <zmq.h>

#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <sstream>

#include "../support/text_file.hpp"
#include "support/admin.hpp"
#include "support/harness.hpp"
#include "support/sim_process.hpp"

namespace kvgate::testing {
namespace {

using nlohmann::json;
using namespace std::chrono_literals;

// Family name -> its type and every label name its samples carry.
struct Family {
  std::string type;
  std::set<std::string> labels;
};

void add_exposition(std::map<std::string, Family>& families, const std::string& text) {
  std::istringstream lines(text);
  static const std::regex kType(R"(^# TYPE (\w+) (\w+)$)");
  static const std::regex kSample(R"(^(\w+)(\{([^}]*)\})? )");
  static const std::regex kLabel(R"((\w+)=")");
  for (std::string line; std::getline(lines, line);) {
    std::smatch match;
    if (std::regex_match(line, match, kType)) {
      families[match[1]].type = match[2];
    } else if (std::regex_search(line, match, kSample)) {
      std::string name = match[1];
      for (const char* suffix : {"_bucket", "_sum", "_count"}) {
        const std::string tail = suffix;
        if (name.ends_with(tail) && families.contains(name.substr(0, name.size() - tail.size()))) {
          name.resize(name.size() - tail.size());
        }
      }
      const std::string labels = match[3];
      for (std::sregex_iterator it(labels.begin(), labels.end(), kLabel), end; it != end; ++it) {
        families[name].labels.insert((*it)[1]);
      }
    }
  }
}

// Every kvgate_* name the shipped dashboard and alert rules query is in
// `families`, with the label names its selectors use.
void expect_every_queried_metric(std::map<std::string, Family>& families) {
  std::string queries;
  const auto dashboard = json::parse(test_support::read_text_file(KVGATE_SOURCE_DIR "/deploy/grafana/kvgate.json"));
  std::size_t panels_with_queries = 0;
  for (const auto& panel : dashboard["panels"]) {
    if (panel.contains("targets")) {
      ++panels_with_queries;
      for (const auto& target : panel["targets"]) {
        queries += target["expr"].get<std::string>() + "\n";
      }
    }
  }
  EXPECT_GE(panels_with_queries, 15u);
  queries += test_support::read_text_file(KVGATE_SOURCE_DIR "/deploy/prometheus/alerts.yaml");
  static const std::regex kSelector(R"((kvgate_[a-z0-9_]+)(\{([^}]*)\})?)");
  static const std::regex kMatcher(R"((\w+)\s*(=~|!~|!=|=))");
  std::set<std::string> checked;
  for (std::sregex_iterator it(queries.begin(), queries.end(), kSelector), end; it != end; ++it) {
    std::string name = (*it)[1];
    for (const char* suffix : {"_bucket", "_sum", "_count"}) {
      const std::string tail = suffix;
      if (name.ends_with(tail) && families.contains(name.substr(0, name.size() - tail.size()))) {
        name.resize(name.size() - tail.size());
      }
    }
    checked.insert(name);
    ASSERT_TRUE(families.contains(name)) << name << " is queried but not exposed";
    const std::string matchers = (*it)[3];
    for (std::sregex_iterator label(matchers.begin(), matchers.end(), kMatcher), none; label != none; ++label) {
      EXPECT_TRUE(families[name].labels.contains((*label)[1])) << name << " has no label " << (*label)[1];
    }
  }
  EXPECT_GE(checked.size(), 25u);
}

// Every kvgate_* family a gateway exposed is named in the reference's
// metrics list (docs/reference.md), so the manual lists what /metrics
// serves.
void expect_every_exposed_metric_documented(const std::map<std::string, Family>& families) {
  const auto reference = test_support::read_text_file(KVGATE_SOURCE_DIR "/docs/reference.md");
  std::size_t checked = 0;
  for (const auto& [name, family] : families) {
    if (!name.starts_with("kvgate_")) {
      continue;
    }
    ++checked;
    EXPECT_NE(reference.find("`" + name), std::string::npos) << name << " is exposed but not in docs/reference.md";
  }
  EXPECT_GE(checked, 40u);
}

// A ZMQ publisher that sends bytes no engine would: the worker's event
// stream counts decode errors.
class JunkPublisher {
 public:
  JunkPublisher() : context_(zmq_ctx_new()), socket_(zmq_socket(context_, ZMQ_PUB)) {
    zmq_bind(socket_, "tcp://127.0.0.1:*");
    char endpoint[256];
    std::size_t size = sizeof endpoint;
    zmq_getsockopt(socket_, ZMQ_LAST_ENDPOINT, endpoint, &size);
    endpoint_ = endpoint;
  }
  ~JunkPublisher() {
    zmq_close(socket_);
    zmq_ctx_term(context_);
  }
  void send_junk() {
    const std::string topic;
    const std::string sequence(8, '\0');
    const std::string payload = "\xc1 not msgpack";
    zmq_send(socket_, topic.data(), topic.size(), ZMQ_SNDMORE);
    zmq_send(socket_, sequence.data(), sequence.size(), ZMQ_SNDMORE);
    zmq_send(socket_, payload.data(), payload.size(), 0);
  }
  [[nodiscard]] const std::string& endpoint() const { return endpoint_; }

 private:
  void* context_;
  void* socket_;
  std::string endpoint_;
};

std::string chat(const std::string& session, int turn) {
  json messages = json::array({{{"role", "system"}, {"content", std::string(300, 'p')}}});
  for (int earlier = 0; earlier <= turn; ++earlier) {
    messages.push_back({{"role", "user"}, {"content", session + " question " + std::to_string(earlier)}});
    if (earlier < turn) {
      messages.push_back({{"role", "assistant"}, {"content", "answer " + std::to_string(earlier)}});
    }
  }
  return json{{"model", "sim-model"}, {"messages", messages}, {"max_tokens", 2}, {"stream", true}}.dump();
}

TEST(Deploy, EveryMetricTheDashboardAndTheAlertsUseExistsWithItsLabelsAndIsDocumented) {
  std::map<std::string, Family> families;
  {
    // A cache-aware fleet: sessions, cache hits, a worker that goes down,
    // event streams that lose batches, restart, and carry junk.
    Harness harness;
    const std::vector<std::string> events{"--kv-events-endpoint", "tcp://127.0.0.1:*"};
    SimProcess a(harness, events, "a");
    SimProcess b(harness, events, "b");
    SimProcess c(harness, {}, "c");
    JunkPublisher junk;
    harness.start_gateway(
        "routing: {policy: cache_aware}\nhealth_check: {interval: 200ms, timeout: 200ms, unhealthy_threshold: 1}\n",
        "models:\n  - name: \"sim-model\"\n    block_size: 16\n    workers:\n"
        "      - {id: a, url: \"" +
            a.url() + "\", kv_events: \"" + a.events_endpoint() + "\"}\n      - {id: b, url: \"" + b.url() +
            "\", kv_events: \"" + b.events_endpoint() + "\"}\n      - {id: c, url: \"" + c.url() + "\", kv_events: \"" +
            junk.endpoint() + "\"}\n");
    ASSERT_TRUE(eventually([&] { return worker_state(harness, "b")["kv_events"]["connected"] == true; }));
    for (int turn = 0; turn < 3; ++turn) {
      for (const std::string session : {"s1", "s2", "s3", "s4"}) {
        ASSERT_EQ(
            post_json(harness.api_port(), "/v1/chat/completions", chat(session, turn), {{"x-session-id", session}})
                .status,
            200);
      }
      junk.send_junk();
    }
    // The gateway must have seen each stream before its fault, or the fault
    // only looks like a late join.
    int fresh = 0;
    ASSERT_TRUE(eventually([&] {
      a.fresh_completion(fresh++);
      b.fresh_completion(fresh++);
      return !worker_state(harness, "a")["kv_events"]["last_sequence"].is_null() &&
             !worker_state(harness, "b")["kv_events"]["last_sequence"].is_null();
    }));
    a.fault({{"mode", "drop_batches"}, {"count", 2}});
    b.fault({{"mode", "restart"}});
    // New prompts straight to the engines after the faults (an engine
    // publishes what it stores, whoever sent the request): the next batches
    // show the gap and the restart.
    ASSERT_TRUE(eventually([&] {
      a.fresh_completion(fresh++);
      b.fresh_completion(fresh++);
      junk.send_junk();
      const auto text = get(harness.admin_port(), "/metrics").body;
      return text.find("kvgate_kv_event_gaps_total") != std::string::npos &&
             text.find("kvgate_kv_event_resets_total") != std::string::npos &&
             text.find("kvgate_kv_event_decode_errors_total") != std::string::npos;
    })) << get(harness.admin_port(), "/debug/workers").body;
    // A session's worker goes down: its next turn moves (moved_unhealthy).
    const auto holder = json::parse(get(harness.admin_port(), "/debug/sessions/s1").body)["worker"].get<std::string>();
    (holder == "a" ? a : holder == "b" ? b : c).stop();
    ASSERT_TRUE(eventually([&] { return worker_state(harness, holder)["healthy"] == false; }));
    for (const std::string session : {"s1", "s2", "s3", "s4"}) {
      post_json(harness.api_port(), "/v1/chat/completions", chat(session, 3), {{"x-session-id", session}});
    }
    EXPECT_EQ(post_json(harness.api_port(), "/v1/chat/completions", "{not json").status, 400);
    add_exposition(families, get(harness.admin_port(), "/metrics").body);
  }
  {
    // A failing fleet behind a tight retry budget and one connection.
    Harness harness;
    RefusingPort refused_1;
    RefusingPort refused_2;
    SimProcess sim(harness, {}, "sim");
    harness.start_gateway(
        "routing: {policy: round_robin}\nhealth_check: {interval: 1h}\n"
        "outlier_detection: {consecutive_failures: 1000}\nlimits: {max_connections: 1}\n"
        "upstream: {retries: 2, retry_budget: {ratio: 0, min_retries_per_second: 1}}\n",
        "models:\n  - name: \"sim-model\"\n    workers:\n      - {id: r1, url: \"http://127.0.0.1:" +
            std::to_string(refused_1.port()) + "\"}\n      - {id: r2, url: \"http://127.0.0.1:" +
            std::to_string(refused_2.port()) + "\"}\n      - {id: sim, url: \"" + sim.url() + "\"}\n");
    // The floor is per I/O thread and over a 10 s window (2 x 10 retries):
    // 40 requests with up to 2 retries each run past it.
    for (int request = 0; request < 40; ++request) {
      try {
        post_json(harness.api_port(), "/v1/completions",
                  json{{"model", "sim-model"}, {"prompt", "hi"}, {"max_tokens", 1}}.dump());
      } catch (const std::exception&) {
        // the previous connection may still count against max_connections: 1
      }
    }
    ASSERT_TRUE(eventually([&] {
      return get(harness.admin_port(), "/metrics").body.find("kvgate_retries_denied_total") != std::string::npos;
    }));
    // One client connection held open; the next one is refused at accept.
    const int held = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_port = htons(static_cast<std::uint16_t>(harness.api_port()));
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ASSERT_EQ(connect(held, reinterpret_cast<sockaddr*>(&address), sizeof address), 0);
    ASSERT_TRUE(eventually([&] {
      try {
        raw_exchange(harness.api_port(), "GET /v1/models HTTP/1.1\r\nhost: x\r\n\r\n", 500ms);
      } catch (const std::exception&) {
        // closed at accept: what this waits for
      }
      return get(harness.admin_port(), "/metrics").body.find("kvgate_connections_rejected_total 0") ==
             std::string::npos;
    }));
    close(held);
    add_exposition(families, get(harness.admin_port(), "/metrics").body);
  }
  {
    // A tenant past its rate limit, and the admission queue.
    Harness harness;
    SimProcess sim(harness, {}, "sim");
    harness.start_gateway(
        "admission: {max_in_flight: 4}\ntenants:\n  - {name: t, limits: {requests_per_minute: 1}, api_key_sha256: "
        "'9b026803df327ca79463366dddb11cbe8aface7f290d5414c969a0d6a94be600'}\n",  // printf %s deploy-test-key |
                                                                                  // sha256sum
        "models:\n  - name: \"sim-model\"\n    workers:\n      - {id: sim, url: \"" + sim.url() + "\"}\n");
    const auto request = json{{"model", "sim-model"}, {"prompt", "hi"}, {"max_tokens", 1}}.dump();
    const Headers key{{"authorization", "Bearer deploy-test-key"}};
    EXPECT_EQ(post_json(harness.api_port(), "/v1/completions", request, key).status, 200);
    EXPECT_EQ(post_json(harness.api_port(), "/v1/completions", request, key).status, 429);
    add_exposition(families, get(harness.admin_port(), "/metrics").body);
  }
  {
    // A disaggregated model whose only prefill worker refuses: the long
    // prompt's remote prefill fails and the decoder prefills it.
    Harness harness;
    RefusingPort refused;
    SimProcess decoder(harness, {"--role", "decode"}, "d");
    harness.start_gateway("health_check: {interval: 1h}\n",
                          "models:\n  - name: \"sim-model\"\n    disaggregation: {protocol: vllm, "
                          "local_prefill_tokens: 16}\n    workers:\n      - {id: p, url: \"http://127.0.0.1:" +
                              std::to_string(refused.port()) + "\", role: prefill}\n      - {id: d, url: \"" +
                              decoder.url() + "\", role: decode}\n");
    EXPECT_EQ(post_json(harness.api_port(), "/v1/completions",
                        json{{"model", "sim-model"}, {"prompt", std::string(2000, 'x')}, {"max_tokens", 1}}.dump())
                  .status,
              200);
    add_exposition(families, get(harness.admin_port(), "/metrics").body);
  }

  expect_every_queried_metric(families);
  expect_every_exposed_metric_documented(families);
}

// Prometheus's guidance for labelled metrics: the label values known in
// advance are exported from the start. A gateway that has served nothing
// yet (in front of a fleet with event streams and tenants configured, and
// a disaggregated model) already exposes every metric the dashboard and the
// alerts query, so no panel is empty and no alert is blind until its first
// event.
TEST(Deploy, AFreshGatewayExposesEveryMetricTheDashboardAndTheAlertsQuery) {
  Harness harness;
  const std::vector<std::string> events{"--kv-events-endpoint", "tcp://127.0.0.1:*"};
  SimProcess a(harness, events, "a");
  SimProcess b(harness, {}, "b");
  SimProcess prefill(harness, {"--role", "prefill", "--model", "pd-model"}, "p");
  SimProcess decode(harness, {"--role", "decode", "--model", "pd-model"}, "d");
  harness.start_gateway(
      "tenants:\n  - {name: t, api_key_sha256: "
      "'9b026803df327ca79463366dddb11cbe8aface7f290d5414c969a0d6a94be600'}\n",
      "models:\n  - name: \"sim-model\"\n    block_size: 16\n    workers:\n      - {id: a, url: \"" + a.url() +
          "\", kv_events: \"" + a.events_endpoint() + "\"}\n      - {id: b, url: \"" + b.url() +
          "\"}\n  - name: \"pd-model\"\n    disaggregation: {protocol: vllm}\n    workers:\n"
          "      - {id: p, url: \"" +
          prefill.url() + "\", role: prefill}\n      - {id: d, url: \"" + decode.url() + "\", role: decode}\n");
  std::map<std::string, Family> families;
  add_exposition(families, get(harness.admin_port(), "/metrics").body);
  expect_every_queried_metric(families);
}

}  // namespace
}  // namespace kvgate::testing
