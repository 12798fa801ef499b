#pragma once
// kvgate-sim as a child process for integration tests: started with the
// given flags on kernel-chosen ports, its endpoints read from its stdout.
#include <algorithm>
#include <chrono>
#include <csignal>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "kvgate/prompt/approximate_prompt.hpp"
#include "kvgate/tokenizer/approximate.hpp"
#include "support/harness.hpp"

namespace kvgate::testing {

class SimProcess {
 public:
  using json = nlohmann::json;

  explicit SimProcess(Harness& harness, std::vector<std::string> extra = {}, const std::string& name = "sim") {
    using namespace std::chrono_literals;
    std::vector<std::string> argv{KVGATE_SIM_BINARY, "--model", "sim-model",   "--id", name, "--block-size", "16",
                                  "--time-scale",    "100",     "--hash-seed", "42"};
    argv.insert(argv.end(), extra.begin(), extra.end());
    process_ = std::make_unique<ChildProcess>(argv, harness.folder() + "/" + name + ".stderr");
    // A deadline, not a wait: with --tokenizer, start-up loads the folder
    // (seconds in the unoptimised sanitizer build).
    port_ = port_from_listening_line(process_->wait_for_line("listening", 60s));
    if (std::find(extra.begin(), extra.end(), "--kv-events-endpoint") != extra.end()) {
      events_endpoint_ = process_->wait_for_line("kv-events ", 10s).substr(10);
    }
    if (std::find(extra.begin(), extra.end(), "--kv-events-replay-endpoint") != extra.end()) {
      replay_endpoint_ = process_->wait_for_line("kv-events-replay ", 10s).substr(17);
    }
  }
  [[nodiscard]] int port() const { return port_; }
  [[nodiscard]] std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  // Stops the process (SIGTERM, then SIGKILL after the grace period).
  void stop() { process_->stop(); }
  // As a crash: SIGKILL, nothing flushed or closed in order.
  void kill_hard() {
    process_->send_signal(SIGKILL);
    (void)process_->wait_exit(std::chrono::seconds(5));
  }
  // The simulator's next KV-event sequence number (a simulator-only gauge).
  [[nodiscard]] std::int64_t next_event_sequence() const {
    auto text = get(port_, "/metrics").body;
    auto at = text.find("\nkvgate_sim_kv_event_next_sequence{");
    return at == std::string::npos ? -1 : std::stoll(text.substr(text.find("} ", at) + 2));
  }
  [[nodiscard]] const std::string& events_endpoint() const { return events_endpoint_; }
  [[nodiscard]] const std::string& replay_endpoint() const { return replay_endpoint_; }
  void fault(const json& body) { ASSERT_EQ(post_json(port_, "/sim/fault", body.dump()).status, 200); }
  // A completion whose prompt shares nothing with earlier ones (new blocks).
  json fresh_completion(int number, int max_tokens = 1) {
    auto prompt = "fresh prompt " + std::to_string(number) + std::string(80, static_cast<char>('k' + number % 10));
    auto response = post_json(port_, "/v1/completions",
                              json{{"model", "sim-model"}, {"prompt", prompt}, {"max_tokens", max_tokens}}.dump());
    return json::parse(response.body);
  }

  json chat(const std::string& user_text, int max_tokens = 2) {
    json body = {
        {"model", "sim-model"},
        {"max_tokens", max_tokens},
        {"messages", {{{"role", "system"}, {"content", kSystem}}, {{"role", "user"}, {"content", user_text}}}}};
    auto response = post_json(port_, "/v1/chat/completions", body.dump());
    EXPECT_EQ(response.status, 200) << response.body;
    return json::parse(response.body);
  }

  static std::vector<kvgate::TokenId> prompt_tokens(const std::string& user_text) {
    return tokenizer::approximate_tokens(
        prompt::render_approximate_chat({{"system", kSystem}, {"user", user_text}}, true));
  }

  static constexpr const char* kSystem =
      "You are a careful assistant. Answer with detail, cite sources and keep the tone friendly and precise.";

 private:
  std::unique_ptr<ChildProcess> process_;
  int port_ = 0;
  std::string events_endpoint_;
  std::string replay_endpoint_;
};

}  // namespace kvgate::testing
