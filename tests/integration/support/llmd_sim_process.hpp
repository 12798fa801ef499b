#pragma once
// llm-d's vLLM simulator (llm-d-inference-sim, the pinned build
// scripts/install_tools.sh puts in .tools/) as a child process: a foreign
// engine with the OpenAI API, vllm: metrics and KV events over ZMQ in
// vLLM's msgpack forms. It dials out to the subscriber (kvgate's
// kv_events.listen) under the topic kv@<POD_IP>@<model>; POD_IP is set to
// its own 127.0.0.1:<port> so that several on one host are told apart.
// Its simulated tokenizer (--force-dummy-tokenizer) needs no network.
// Ready when /health answers 200; stopped by PID. Without the binary the
// suite fails (scripts/setup.sh test installs it), never skips.
#include <chrono>
#include <csignal>
#include <filesystem>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "support/harness.hpp"
#include "support/process.hpp"
#include "support/readiness.hpp"

namespace kvgate::testing {

class LlmdSimProcess {
 public:
  // `map_events`: vLLM's newer map form (--use-vllm-map-event-format), else
  // the positional arrays. `port` 0: a free one.
  LlmdSimProcess(Harness& harness, const std::string& name, const std::string& events_endpoint, bool map_events,
                 int port = 0, std::vector<std::string> extra = {}) {
    if (!std::filesystem::exists(KVGATE_LLMD_SIM_BINARY)) {
      throw std::runtime_error(std::string("no llm-d-inference-sim at ") + KVGATE_LLMD_SIM_BINARY +
                               ": run scripts/setup.sh test (it builds the pinned simulator into .tools/)");
    }
    port_ = port != 0 ? port : free_loopback_port();
    // env(1) sets POD_IP and execs the simulator: the same PID.
    std::vector<std::string> argv{"/usr/bin/env",
                                  "POD_IP=" + address(),
                                  KVGATE_LLMD_SIM_BINARY,
                                  "--model",
                                  "sim-model",
                                  "--port",
                                  std::to_string(port_),
                                  "--force-dummy-tokenizer",
                                  "--enable-kvcache",
                                  "--kv-cache-size",
                                  "4096",
                                  "--block-size",
                                  "16",
                                  "--hash-seed",
                                  "42",
                                  "--seed",
                                  "7",
                                  "--max-model-len",
                                  "65536",
                                  "--max-num-seqs",
                                  "8",
                                  "--prefill-time-per-token",
                                  "20us",
                                  "--inter-token-latency",
                                  "2ms",
                                  "--zmq-endpoint",
                                  events_endpoint};
    if (map_events) {
      argv.emplace_back("--use-vllm-map-event-format");
    }
    argv.insert(argv.end(), extra.begin(), extra.end());
    process_ = std::make_unique<ChildProcess>(argv, harness.folder() + "/" + name + ".stderr");
    wait_until_ready(*process_, port_, "/health", "llm-d-inference-sim");
  }

  [[nodiscard]] int port() const { return port_; }
  [[nodiscard]] std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  [[nodiscard]] std::string address() const { return "127.0.0.1:" + std::to_string(port_); }
  void stop() { process_->stop(); }
  void kill_hard() {
    process_->send_signal(SIGKILL);
    (void)process_->wait_exit(std::chrono::seconds(5));
  }

 private:
  int port_ = 0;
  std::unique_ptr<ChildProcess> process_;
};

}  // namespace kvgate::testing
