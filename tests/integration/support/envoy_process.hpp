#pragma once
// A real Envoy (the pinned build scripts/install_tools.sh puts in .tools/)
// running deploy/envoy/envoy.yaml, the configuration the project ships,
// with only its three ports changed: the OpenAI listener, the picker's
// address (kvgate's epp_listen) and the admin interface, all on 127.0.0.1.
// Ready when its admin /ready answers 200; stopped by PID. Without the
// binary the suite fails (scripts/setup.sh test installs it), never skips.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>

#include "support/harness.hpp"
#include "support/process.hpp"
#include "support/readiness.hpp"

namespace kvgate::testing {

class EnvoyProcess {
 public:
  EnvoyProcess(Harness& harness, int picker_port, const std::string& name = "envoy") {
    if (!std::filesystem::exists(KVGATE_ENVOY_BINARY)) {
      throw std::runtime_error(std::string("no Envoy at ") + KVGATE_ENVOY_BINARY +
                               ": run scripts/setup.sh test (it installs the pinned Envoy into .tools/)");
    }
    port_ = free_loopback_port();
    admin_port_ = free_loopback_port();
    std::ifstream shipped(std::string(KVGATE_SOURCE_DIR) + "/deploy/envoy/envoy.yaml");
    std::stringstream text;
    text << shipped.rdbuf();
    auto config = text.str();
    replace_once(config, "{address: 0.0.0.0, port_value: 8081}",
                 "{address: 127.0.0.1, port_value: " + std::to_string(port_) + "}");
    replace_once(config, "port_value: 9002}", "port_value: " + std::to_string(picker_port) + "}");
    replace_once(config, "port_value: 9901}", "port_value: " + std::to_string(admin_port_) + "}");
    config_path_ = harness.folder() + "/" + name + ".yaml";
    std::ofstream(config_path_) << config;
    // One worker thread, no hot-restart shared memory (suites run in
    // parallel), warnings and worse in its stderr file.
    process_ = std::make_unique<ChildProcess>(
        std::vector<std::string>{KVGATE_ENVOY_BINARY, "-c", config_path_, "--concurrency", "1", "--disable-hot-restart",
                                 "-l", "warn"},
        harness.folder() + "/" + name + ".stderr");
    wait_until_ready(*process_, admin_port_, "/ready", "Envoy");
  }

  [[nodiscard]] int port() const { return port_; }
  [[nodiscard]] int admin_port() const { return admin_port_; }
  // A counter or gauge of Envoy's admin /stats (0 when absent).
  [[nodiscard]] std::uint64_t stat(const std::string& name) const {
    auto text = get(admin_port_, "/stats?filter=^" + name + "$").body;
    auto at = text.find(name + ": ");
    return at == std::string::npos ? 0 : std::stoull(text.substr(at + name.size() + 2));
  }
  [[nodiscard]] std::string stderr_text() const { return process_->stderr_text(); }
  void stop() { process_->stop(); }

 private:
  static void replace_once(std::string& text, const std::string& from, const std::string& to) {
    auto at = text.find(from);
    if (at == std::string::npos || text.find(from, at + 1) != std::string::npos) {
      throw std::runtime_error("deploy/envoy/envoy.yaml no longer has exactly one '" + from + "'");
    }
    text.replace(at, from.size(), to);
  }

  int port_ = 0;
  int admin_port_ = 0;
  std::string config_path_;
  std::unique_ptr<ChildProcess> process_;
};

}  // namespace kvgate::testing
