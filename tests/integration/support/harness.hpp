#pragma once
// Starts real processes for one test: kvgate-test-upstream replicas and a
// kvgate in front of them, on 127.0.0.1 with kernel-chosen ports, in a
// temporary folder that holds the config and the processes' stderr.
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "http_client.hpp"
#include "process.hpp"

namespace kvgate::testing {

struct UpstreamProcess {
  std::string id;
  int port = 0;
  std::unique_ptr<ChildProcess> process;
  [[nodiscard]] std::string url() const { return "http://127.0.0.1:" + std::to_string(port); }
};

class Harness {
 public:
  Harness();
  ~Harness();

  // port 0: the kernel picks one.
  UpstreamProcess& start_upstream(const std::string& id, int port = 0);
  // Stops the upstream's process (SIGTERM) and starts a new one on its port.
  void restart_upstream(const std::string& id);

  // A models: section with one model "test-model" served by the given
  // workers (id -> URL), in order.
  static std::string models_yaml(const std::vector<std::pair<std::string, std::string>>& workers,
                                 const std::string& model = "test-model");
  // Every started upstream as a worker with the upstream's id.
  [[nodiscard]] std::string models_for_upstreams() const;

  // Writes the config (listen addresses are added) and starts kvgate.
  void start_gateway(const std::string& settings_yaml, const std::string& models_yaml);
  std::string write_config(const std::string& settings_yaml, const std::string& models_yaml);
  [[nodiscard]] const std::string& config_path() const { return config_path_; }

  ChildProcess& gateway() { return *gateway_; }
  [[nodiscard]] int api_port() const { return api_port_; }
  [[nodiscard]] int admin_port() const { return admin_port_; }
  // The endpoint picker's gRPC port (epp_listen set); 0 otherwise.
  [[nodiscard]] int epp_port() const { return epp_port_; }
  [[nodiscard]] const std::string& folder() const { return folder_; }

  UpstreamProcess& upstream(const std::string& id) { return upstreams_.at(id); }
  // GET /control/wait on an upstream: blocks until its counters reach the
  // given values (query string, e.g. "aborted=1"), returns its stats.
  HttpResponse wait_upstream(const std::string& id, const std::string& query);

 private:
  std::string folder_;
  std::string config_path_;
  std::map<std::string, UpstreamProcess> upstreams_;
  std::vector<std::string> upstream_order_;
  std::unique_ptr<ChildProcess> gateway_;
  int api_port_ = 0;
  int admin_port_ = 0;
  int epp_port_ = 0;
};

// A chat request body for "test-model".
std::string chat_body(bool stream = false, int max_tokens = 4, const std::string& extra = "");

// A port on 127.0.0.1 that refuses connections while the object lives (a
// bound socket that never listens).
class RefusingPort {
 public:
  RefusingPort();
  ~RefusingPort();
  [[nodiscard]] int port() const { return port_; }

 private:
  int fd_ = -1;
  int port_ = 0;
};

}  // namespace kvgate::testing
