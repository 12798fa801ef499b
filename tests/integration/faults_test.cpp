// Nothing lost under faults: streaming load through the gateway while its
// kvgate-sim replicas fail in every way /sim/fault offers, one is killed
// with SIGKILL, its connections to another are destroyed under it (ss -K),
// and two reloads add and remove workers and change the policy. Counted on both sides: every request the clients sent
// ends complete or with a well-formed error, within its deadline, never silently short; the gateway counted as many.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <iostream>
#include <map>
#include <mutex>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "support/admin.hpp"
#include "support/harness.hpp"
#include "support/sim_process.hpp"

namespace kvgate::testing {
namespace {

using nlohmann::json;
using namespace std::chrono_literals;

enum class Ending { completed, error_status, error_event, lost };

struct Outcome {
  Ending ending = Ending::lost;
  std::string detail;
  double seconds = 0;
};

// One streamed chat request, classified by how its stream ended.
Outcome stream_once(int port, int number) {
  const auto body =
      json{{"model", "sim-model"},
           {"max_tokens", 12},
           {"stream", true},
           {"messages", json::array({{{"role", "user"},
                                      {"content", "request " + std::to_string(number) + " asks about fault tolerance " +
                                                      std::string(40, 'a' + number % 26)}}})}}
          .dump();
  Outcome outcome;
  const auto started = std::chrono::steady_clock::now();
  try {
    EventStream stream(port, "/v1/chat/completions", body);
    if (stream.status() != 200) {
      // kvgate's own refusals and failures: 5xx (or 429) in OpenAI's shape.
      outcome.ending = stream.status() >= 500 || stream.status() == 429 ? Ending::error_status : Ending::lost;
      outcome.detail = "status " + std::to_string(stream.status());
    } else {
      const auto events = stream.rest();
      bool error = false;
      bool finished = false;
      for (const auto& event : events) {
        if (event == "[DONE]") {
          continue;
        }
        auto parsed = json::parse(event, nullptr, false);
        if (parsed.is_discarded()) {
          outcome.detail = "an event that is not JSON: " + event;
          error = false;
          finished = false;
          break;
        }
        error = error || parsed.contains("error");
        if (parsed.contains("choices") && !parsed["choices"].empty() &&
            !parsed["choices"][0]["finish_reason"].is_null()) {
          finished = true;
        }
      }
      const bool terminated = !events.empty() && events.back() == "[DONE]";
      if (terminated && error) {
        outcome.ending = Ending::error_event;
      } else if (terminated && finished) {
        outcome.ending = Ending::completed;
      } else if (outcome.detail.empty()) {
        outcome.detail = "stream ended without " + std::string(terminated ? "a finish_reason" : "[DONE]") + " after " +
                         std::to_string(events.size()) + " events";
      }
    }
  } catch (const std::exception& failure) {
    outcome.detail = std::string("client: ") + failure.what();
  }
  outcome.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  return outcome;
}

std::string models_yaml(const std::vector<std::pair<std::string, const SimProcess*>>& sims) {
  std::string yaml = "models:\n  - name: \"sim-model\"\n    block_size: 16\n    workers:\n";
  for (const auto& [id, sim] : sims) {
    yaml += "      - {id: " + id + ", url: \"" + sim->url() + "\"";
    if (!sim->events_endpoint().empty()) {
      yaml += ", kv_events: \"" + sim->events_endpoint() + "\"";
    }
    yaml += "}\n";
  }
  return yaml;
}

TEST(Faults, UnderEveryFaultNothingIsLostAndBothSidesCountTheSame) {
  Harness harness;
  const std::vector<std::string> events{"--kv-events-endpoint", "tcp://127.0.0.1:*"};
  SimProcess a(harness, events, "a");
  SimProcess b(harness, events, "b");
  SimProcess c(harness, events, "c");
  SimProcess d(harness, events, "d");  // joins with the first reload
  const std::string settings =
      "health_check: {interval: 1s, timeout: 500ms, unhealthy_threshold: 2}\n"
      "timeouts: {upstream_connect: 500ms, upstream_response: 1s, upstream_idle: 1s}\n"
      "upstream: {retries: 2}\n";
  // Round robin first, so every worker surely gets traffic during its fault.
  harness.start_gateway("routing: {policy: round_robin}\n" + settings, models_yaml({{"a", &a}, {"b", &b}, {"c", &c}}));

  std::atomic<bool> stop{false};
  std::atomic<int> sequence{0};
  std::mutex mutex;
  std::vector<Outcome> outcomes;
  std::vector<std::thread> clients;
  for (int client = 0; client < 4; ++client) {
    clients.emplace_back([&] {
      while (!stop.load()) {
        auto outcome = stream_once(harness.api_port(), sequence.fetch_add(1));
        std::lock_guard lock(mutex);
        outcomes.push_back(std::move(outcome));
      }
    });
  }
  auto phase = [&](SimProcess& sim, const json& fault) {
    sim.fault(fault);
    std::this_thread::sleep_for(1500ms);
    sim.fault({{"mode", "none"}});
  };
  std::this_thread::sleep_for(1s);
  // Hang first: a worker ejected by earlier failures would get no traffic.
  phase(b, {{"mode", "hang"}});                     // no header within upstream_response: retried elsewhere
  phase(b, {{"mode", "status"}, {"status", 500}});  // relayed as the engine's answer, then ejected
  phase(c, {{"mode", "slow"}, {"factor", 20}});
  phase(c, {{"mode", "drop_after"}, {"tokens", 3}});  // mid-stream: an error event and [DONE]
  // The gateway's connections to c torn down under it (as a node's network
  // failing): `ss -K` destroys the sockets (root, iproute2). Streams to c
  // are cut mid-way; requests not yet answered are retried elsewhere.
  int destroyed = 0;
  for (int round = 0; round < 15; ++round) {
    const auto command = "ss -K -H -t dst 127.0.0.1 dport = :" + std::to_string(c.port()) + " 2>/dev/null";
    if (FILE* listing = popen(command.c_str(), "r")) {
      char line[512];
      while (fgets(line, sizeof line, listing) != nullptr) {
        ++destroyed;
      }
      pclose(listing);
    }
    std::this_thread::sleep_for(100ms);
  }
  EXPECT_GT(destroyed, 0) << "ss -K destroyed no connection to c";
  phase(a, {{"mode", "drop_batches"}, {"count", 5}});
  phase(a, {{"mode", "restart"}});
  b.kill_hard();
  std::this_thread::sleep_for(1500ms);
  // Reloads while traffic flows: b (dead) and c leave, d joins, the policy changes.
  harness.write_config("routing: {policy: cache_aware}\n" + settings, models_yaml({{"a", &a}, {"d", &d}}));
  harness.gateway().send_signal(SIGHUP);
  std::this_thread::sleep_for(1500ms);
  harness.write_config("routing: {policy: session_hash}\n" + settings, models_yaml({{"a", &a}, {"c", &c}, {"d", &d}}));
  harness.gateway().send_signal(SIGHUP);
  std::this_thread::sleep_for(1500ms);
  stop = true;
  for (auto& client : clients) {
    client.join();
  }

  std::map<Ending, int> counts;
  double slowest = 0;
  for (const auto& outcome : outcomes) {
    ++counts[outcome.ending];
    slowest = std::max(slowest, outcome.seconds);
    EXPECT_NE(outcome.ending, Ending::lost) << outcome.detail;
  }
  const int sent = static_cast<int>(outcomes.size());
  std::cout << "faults: sent " << sent << ", completed " << counts[Ending::completed] << ", error statuses "
            << counts[Ending::error_status] << ", error events " << counts[Ending::error_event] << ", lost "
            << counts[Ending::lost] << ", slowest " << slowest << " s\n";
  SCOPED_TRACE("sent " + std::to_string(sent) + ", completed " + std::to_string(counts[Ending::completed]) +
               ", error statuses " + std::to_string(counts[Ending::error_status]) + ", error events " +
               std::to_string(counts[Ending::error_event]));
  EXPECT_GT(sent, 100);
  EXPECT_EQ(counts[Ending::lost], 0);
  // Most requests survive: failures before the first byte are retried on
  // another worker; only streams cut mid-way end with an error event.
  EXPECT_GE(counts[Ending::completed], sent * 8 / 10);
  EXPECT_GT(counts[Ending::error_event], 0);  // the drop_after phase did cut streams
  // Every request ended well within its deadline (1 s to the header, 1 s
  // between reads, two retries).
  EXPECT_LT(slowest, 8.0);
  EXPECT_GT(slowest, 0.9);  // the hang phase held some requests for upstream_response
  // The gateway's own count of answered requests is the clients' count: the
  // model's (a worker's own series left /metrics with the worker when it
  // was reloaded away).
  EXPECT_TRUE(eventually([&] {
    const auto text = get(harness.admin_port(), "/metrics").body;
    double answered = 0;
    for (std::size_t at = text.find("\nkvgate_request_duration_seconds_count{"); at != std::string::npos;
         at = text.find("\nkvgate_request_duration_seconds_count{", at + 1)) {
      answered += std::stod(text.substr(text.find("} ", at) + 2));
    }
    return static_cast<int>(answered) == sent;
  }));
  EXPECT_EQ(metric_value(harness, R"(kvgate_config_reloads_total{result="success"})"), 2);
  EXPECT_EQ(kill(harness.gateway().pid(), 0), 0) << "the gateway died";
}

}  // namespace
}  // namespace kvgate::testing
