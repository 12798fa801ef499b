#pragma once
// A gateway in front of kvgate-sim replicas with KV events, for the
// integration tests of the prefix index and exact tokenisation.
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "sim_process.hpp"

namespace kvgate::testing {

using nlohmann::json;
using namespace std::chrono_literals;

constexpr const char* kSystem =
    "You are the support assistant of a large hardware store. Answer precisely, list the parts needed, and "
    "say which aisle they are in. Never invent prices.";

inline json chat_request(const json& messages, int max_tokens = 24) {
  return {{"model", "sim-model"}, {"max_tokens", max_tokens}, {"messages", messages}};
}

inline json first_turn(const std::string& question) {
  return json::array({{{"role", "system"}, {"content", kSystem}}, {{"role", "user"}, {"content", question}}});
}

class Fleet {
 public:
  // Each sim: its id and extra flags; events on unless "--no-events".
  SimProcess& add_sim(const std::string& id, const std::string& format = "map", bool replay = true,
                      std::vector<std::string> extra = {}) {
    std::vector<std::string> flags{"--kv-events-endpoint", "tcp://127.0.0.1:0", "--kv-events-format", format};
    if (!tokenizer.empty()) {
      flags.insert(flags.end(), {"--tokenizer", tokenizer});
    }
    if (replay) {
      flags.insert(flags.end(), {"--kv-events-replay-endpoint", "tcp://127.0.0.1:0"});
    }
    flags.insert(flags.end(), extra.begin(), extra.end());
    sims_.emplace_back(id, std::make_unique<SimProcess>(harness, flags, id));
    return *sims_.back().second;
  }

  SimProcess& sim(const std::string& id) {
    for (auto& [sim_id, process] : sims_) {
      if (sim_id == id) {
        return *process;
      }
    }
    throw std::runtime_error("no sim " + id);
  }

  // Stops a sim and starts a new process on the same HTTP and ZMQ ports.
  void replace_sim(const std::string& id, const std::string& format = "map") {
    for (auto& [sim_id, process] : sims_) {
      if (sim_id != id) {
        continue;
      }
      auto port = std::to_string(process->port());
      auto events = process->events_endpoint();
      auto replay = process->replay_endpoint();
      process->stop();
      process.reset();
      process = std::make_unique<SimProcess>(
          harness,
          std::vector<std::string>{"--port", port, "--kv-events-endpoint", events, "--kv-events-format", format,
                                   "--kv-events-replay-endpoint", replay},
          id + "-again");
    }
  }

  // `health_check`: replaces the default (checks every 200 ms).
  void start_gateway(const std::string& settings = "", const std::string& events_override = "",
                     const std::string& health_check = "health_check: {interval: 200ms}\n") {
    harness.start_gateway("routing: {policy: cache_aware}\n" + health_check + settings, models_yaml(events_override));
    if (events_override.empty()) {
      for (auto& [id, process] : sims_) {
        warm_up(id);
      }
    }
  }

  // Another gateway in front of the same sims (its own process, config and
  // ports), caught up with every sim's events like the first.
  void start_another_gateway(Harness& other, const std::string& settings = "") {
    other.start_gateway("routing: {policy: cache_aware}\nhealth_check: {interval: 200ms}\n" + settings, models_yaml());
    for (auto& [id, process] : sims_) {
      warm_up(id, other.admin_port());
    }
  }

  [[nodiscard]] std::string models_yaml(const std::string& events_override = "") const {
    std::string models = "models:\n  - name: \"sim-model\"\n    block_size: 16\n";
    if (!tokenizer.empty()) {
      models += "    tokenizer: \"" + tokenizer + "\"\n";
    }
    models += model_settings;
    if (!adapters.empty()) {
      models += "    adapters:\n";
      for (const auto& adapter : adapters) {
        models += "      - \"" + adapter + "\"\n";
      }
    }
    models += "    workers:\n";
    for (auto& [id, process] : sims_) {
      models += "      - id: \"" + id + "\"\n        url: \"" + process->url() + "\"\n";
      auto events = events_override.empty() ? process->events_endpoint() : events_override;
      models += "        kv_events: \"" + events + "\"\n";
      if (!process->replay_endpoint().empty() && events_override.empty()) {
        models += "        kv_events_replay: \"" + process->replay_endpoint() + "\"\n";
      }
    }
    return models;
  }

  // A SUB socket misses what is published before its subscription reaches
  // the publisher (ZMQ's "slow joiner"), which the gateway rightly treats as
  // a late join. Tests need a known start: publish until the gateway has
  // caught up with the simulator.
  void warm_up(const std::string& id, int admin_port = 0) {
    if (admin_port == 0) {
      admin_port = harness.admin_port();
    }
    const auto deadline_connected = std::chrono::steady_clock::now() + 10s;
    while (worker(id, admin_port)["kv_events"]["connected"] != true) {
      ASSERT_LT(std::chrono::steady_clock::now(), deadline_connected) << id << " never connected";
      std::this_thread::sleep_for(10ms);
    }
    for (int attempt = 0; attempt < 50; ++attempt) {
      post_json(sim(id).port(), "/v1/completions",
                json{{"model", "sim-model"},
                     {"prompt", "warm-up " + std::to_string(attempt) + std::string(64, 'w')},
                     {"max_tokens", 1}}
                    .dump());
      auto deadline = std::chrono::steady_clock::now() + 200ms;
      while (std::chrono::steady_clock::now() < deadline) {
        if (synced(worker(id, admin_port), id)) {
          return;
        }
        std::this_thread::sleep_for(10ms);
      }
    }
    FAIL() << "the gateway never caught up with " << id << "'s events";
  }

  bool synced(const json& worker, const std::string& id) {
    auto last = worker["kv_events"]["last_sequence"];
    auto next = sim(id).next_event_sequence();
    return next == 0 ? last.is_null() : !last.is_null() && last.get<std::int64_t>() == next - 1;
  }

  json worker(const std::string& id, int admin_port = 0) {
    auto workers = json::parse(get(admin_port == 0 ? harness.admin_port() : admin_port, "/debug/workers").body);
    for (const auto& worker : workers["workers"]) {
      if (worker["id"] == id) {
        return worker;
      }
    }
    throw std::runtime_error("no worker " + id);
  }

  // Waits until the gateway has taken in every batch the sim published.
  void wait_synced(const std::string& id) {
    wait_until(id, [&](const json& worker) { return synced(worker, id); });
  }

  template <class Condition>
  void wait_until(const std::string& id, Condition condition) {
    auto deadline = std::chrono::steady_clock::now() + 10s;
    json last;
    while (std::chrono::steady_clock::now() < deadline) {
      last = worker(id);
      if (condition(last)) {
        return;
      }
      std::this_thread::sleep_for(20ms);  // polling an admin endpoint for a remote process's state
    }
    FAIL() << "worker " << id << " never reached the condition; last state: " << last.dump();
  }

  json route(const json& body) {
    auto response = post_json(harness.admin_port(), "/debug/route", body.dump());
    EXPECT_EQ(response.status, 200) << response.body;
    return json::parse(response.body);
  }

  static std::uint32_t predicted(const json& route, const std::string& id) {
    for (const auto& candidate : route["candidates"]) {
      if (candidate["worker"] == id) {
        return candidate["cached_tokens"].get<std::uint32_t>();
      }
    }
    throw std::runtime_error("no candidate " + id);
  }

  // Sends the body straight to a sim and returns the engine's cached tokens.
  std::uint32_t engine_cached(const std::string& id, const json& body) {
    auto response = post_json(sim(id).port(), "/v1/chat/completions", body.dump());
    EXPECT_EQ(response.status, 200) << response.body;
    return json::parse(response.body)["usage"]["prompt_tokens_details"]["cached_tokens"].get<std::uint32_t>();
  }

  // One turn through the gateway; returns the worker and the assistant text.
  std::pair<std::string, std::string> turn(const json& messages) {
    auto response = post_json(harness.api_port(), "/v1/chat/completions", chat_request(messages).dump());
    EXPECT_EQ(response.status, 200) << response.body;
    auto body = json::parse(response.body);
    return {response.header("x-kvgate-worker"), body["choices"][0]["message"]["content"].get<std::string>()};
  }

  Harness harness;
  // A model folder both the sims and the gateway tokenise with; empty: the
  // approximate tokenisation.
  std::string tokenizer;
  // models[].adapters of the gateway's model (the sims need --lora-adapters).
  std::vector<std::string> adapters;
  // More keys of the model's entry, each line indented by four spaces.
  std::string model_settings;

 private:
  std::vector<std::pair<std::string, std::unique_ptr<SimProcess>>> sims_;
};

inline json second_turn(const json& first, const std::string& answer, const std::string& question) {
  auto messages = first;
  messages.push_back({{"role", "assistant"}, {"content", answer}});
  messages.push_back({{"role", "user"}, {"content", question}});
  return messages;
}

}  // namespace kvgate::testing
