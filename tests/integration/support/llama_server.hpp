#pragma once
// A real llama.cpp `llama-server` as a child process (../shared/engines/
// llama.cpp: a pinned upstream build, see its README), for the suites that
// check kvgate against the engine itself rather than kvgate-sim. Started on
// a free loopback port with --metrics and the small models of
// ../shared/data/models, waited for until /health answers 200, stopped by
// PID. A machine that cannot run it (no binary; a CPU without AVX2, where
// it dies with SIGILL) skips the test with the reason, never passes it.
#include <gtest/gtest.h>

#include <chrono>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "support/admin.hpp"
#include "support/harness.hpp"
#include "support/process.hpp"

namespace kvgate::testing {

// Why this machine cannot run the real engine ("" when it can).
inline std::string llama_server_missing() {
  if (std::string(KVGATE_LLAMA_SERVER).empty() || !std::filesystem::exists(KVGATE_LLAMA_SERVER)) {
    return "no llama-server binary (configure with -DKVGATE_LLAMA_SERVER=PATH, or keep ../shared beside the project)";
  }
  if (!std::filesystem::exists(std::string(KVGATE_LLAMA_MODELS) + "/llama-2-tiny-random.gguf")) {
    return "no models folder " + std::string(KVGATE_LLAMA_MODELS);
  }
  return "";
}

class LlamaServer {
 public:
  // `flags`: llama-server flags after the model and the port, e.g.
  // {"-np", "2", "--cache-ram", "0"}. Sets `skip_reason` instead of
  // starting when the machine cannot run it.
  LlamaServer(Harness& harness, const std::string& name, const std::string& model, std::vector<std::string> flags,
              std::string& skip_reason) {
    using namespace std::chrono_literals;
    skip_reason = llama_server_missing();
    if (!skip_reason.empty()) {
      return;
    }
    port_ = free_loopback_port();
    std::vector<std::string> argv{KVGATE_LLAMA_SERVER,
                                  "-m",
                                  std::string(KVGATE_LLAMA_MODELS) + "/" + model,
                                  "--host",
                                  "127.0.0.1",
                                  "--port",
                                  std::to_string(port_),
                                  "--metrics",
                                  "-t",
                                  "1",
                                  "-fa",
                                  "off",
                                  "--no-warmup"};
    argv.insert(argv.end(), flags.begin(), flags.end());
    process_ = std::make_unique<ChildProcess>(argv, harness.folder() + "/" + name + ".stderr");
    const bool up = eventually(
        [&] {
          if (process_->wait_exit(0ms)) {
            return true;  // ended: reported below
          }
          try {
            return get(port_, "/health").status == 200;
          } catch (const std::exception&) {
            return false;  // not listening yet
          }
        },
        30s);
    if (auto status = process_->wait_exit(0ms)) {
      if (*status == 128 + SIGILL) {
        skip_reason = "llama-server died with SIGILL: this CPU lacks the AVX2/FMA/F16C it was built for";
        return;
      }
      ADD_FAILURE() << name << " exited with status " << *status << ":\n" << process_->stderr_text();
      return;
    }
    EXPECT_TRUE(up) << name << " did not answer /health within 30 s:\n" << process_->stderr_text();
  }

  [[nodiscard]] int port() const { return port_; }
  [[nodiscard]] std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  void kill_hard() {
    process_->send_signal(SIGKILL);
    (void)process_->wait_exit(std::chrono::seconds(5));
  }
  void stop() { process_->stop(); }

 private:
  std::unique_ptr<ChildProcess> process_;
  int port_ = 0;
};

// A tokenizer folder for the Llama-2 vocabulary of the small models, made
// from the GGUF by tools/gguf_tokenizer.py into `folder` (what an operator
// points `tokenizer:` at); empty when it could not be made.
inline std::string llama_tokenizer_folder(const std::string& folder) {
  const auto command = "python3 " + std::string(KVGATE_SOURCE_DIR) + "/tools/gguf_tokenizer.py " +
                       std::string(KVGATE_LLAMA_MODELS) + "/llama-2-tiny-random.gguf " + folder;
  return std::system(command.c_str()) == 0 ? folder : "";
}

}  // namespace kvgate::testing
