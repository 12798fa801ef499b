#pragma once
// Waiting for a third-party server that announces nothing on stdout
// (Envoy, llm-d-inference-sim): its health path polled until it answers
// 200, the process watched so that one that died fails at once with its
// stderr.
#include <chrono>
#include <stdexcept>
#include <string>
#include <thread>

#include "support/http_client.hpp"
#include "support/process.hpp"

namespace kvgate::testing {

inline void wait_until_ready(ChildProcess& process, int port, const std::string& path, const std::string& what,
                             std::chrono::milliseconds limit = std::chrono::seconds(30)) {
  using namespace std::chrono_literals;
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (true) {
    try {
      if (get(port, path).status == 200) {
        return;
      }
    } catch (const std::exception&) {
      // not listening yet
    }
    if (process.wait_exit(0ms).has_value() || std::chrono::steady_clock::now() > deadline) {
      throw std::runtime_error(what + " did not start: " + process.stderr_text());
    }
    std::this_thread::sleep_for(50ms);  // start-up poll: the server announces nothing
  }
}

}  // namespace kvgate::testing
