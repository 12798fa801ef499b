#include "harness.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <stdexcept>

namespace kvgate::testing {

using namespace std::chrono_literals;

Harness::Harness() {
  std::string pattern = (std::filesystem::temp_directory_path() / "kvgate-it-XXXXXX").string();
  if (::mkdtemp(pattern.data()) == nullptr) {
    throw std::runtime_error("mkdtemp failed");
  }
  folder_ = pattern;
}

namespace {

// A sanitizer report in a child process fails the test that ran it (the
// child itself may still have answered every request correctly).
void check_sanitizer_reports(const std::string& name, ChildProcess& process) {
  auto text = process.stderr_text();
  for (const char* marker : {"ERROR: AddressSanitizer", "ERROR: LeakSanitizer", "runtime error:"}) {
    if (text.find(marker) != std::string::npos) {
      ADD_FAILURE() << name << " reported a sanitizer error:\n" << text;
      return;
    }
  }
}

}  // namespace

Harness::~Harness() {
  if (gateway_) {
    gateway_->stop();
    check_sanitizer_reports("kvgate", *gateway_);
  }
  for (auto& [id, upstream] : upstreams_) {
    upstream.process->stop();
    check_sanitizer_reports(id, *upstream.process);
  }
  if (std::getenv("KVGATE_KEEP_TEST_FILES") != nullptr) {
    std::cerr << "kept: " << folder_ << "\n";  // logs and configs, for a failure's post-mortem
    return;
  }
  std::error_code ignored;
  std::filesystem::remove_all(folder_, ignored);
}

UpstreamProcess& Harness::start_upstream(const std::string& id, int port) {
  UpstreamProcess upstream;
  upstream.id = id;
  upstream.process =
      std::make_unique<ChildProcess>(std::vector<std::string>{KVGATE_TEST_UPSTREAM_BINARY, "--id", id, "--model",
                                                              "test-model", "--port", std::to_string(port)},
                                     folder_ + "/" + id + ".stderr");
  upstream.port = port_from_listening_line(upstream.process->wait_for_line("listening", 10s));
  if (std::find(upstream_order_.begin(), upstream_order_.end(), id) == upstream_order_.end()) {
    upstream_order_.push_back(id);
  }
  return upstreams_[id] = std::move(upstream);
}

void Harness::restart_upstream(const std::string& id) {
  auto port = upstreams_.at(id).port;
  upstreams_.at(id).process->stop();
  start_upstream(id, port);
}

std::string Harness::models_yaml(const std::vector<std::pair<std::string, std::string>>& workers,
                                 const std::string& model) {
  std::string yaml = "models:\n  - name: " + model + "\n    workers:\n";
  for (const auto& [id, url] : workers) {
    yaml += "      - id: " + id + "\n        url: " + url + "\n";
  }
  return yaml;
}

std::string Harness::models_for_upstreams() const {
  std::vector<std::pair<std::string, std::string>> workers;
  for (const auto& id : upstream_order_) {
    workers.emplace_back(id, upstreams_.at(id).url());
  }
  return models_yaml(workers);
}

std::string Harness::write_config(const std::string& settings_yaml, const std::string& models_yaml) {
  config_path_ = folder_ + "/kvgate.yaml";
  std::ofstream file(config_path_);
  // Two I/O threads unless the test's settings choose.
  bool sets_threads = settings_yaml.starts_with("threads:") || settings_yaml.find("\nthreads:") != std::string::npos;
  file << "listen: \"127.0.0.1:0\"\nadmin_listen: \"127.0.0.1:0\"\n"
       << (sets_threads ? "" : "threads: 2\n") << settings_yaml << "\n"
       << models_yaml;
  return config_path_;
}

void Harness::start_gateway(const std::string& settings_yaml, const std::string& models_yaml) {
  write_config(settings_yaml, models_yaml);
  gateway_ = std::make_unique<ChildProcess>(
      std::vector<std::string>{KVGATE_BINARY, "--config", config_path_, "--log-level", "debug"},
      folder_ + "/kvgate.stderr");
  // Start-up loads any tokenizer folder first: seconds for Gemma 3's
  // 262k-token vocabulary in the unoptimised sanitizer build.
  auto line = gateway_->wait_for_line("kvgate listening", 60s);
  auto api = line.find("api=");
  auto admin = line.find(" admin=");
  auto epp = line.find(" epp=");
  api_port_ = port_from_listening_line(line.substr(api, admin - api));
  admin_port_ =
      port_from_listening_line(line.substr(admin, epp == std::string::npos ? std::string::npos : epp - admin));
  epp_port_ = epp == std::string::npos ? 0 : port_from_listening_line(line.substr(epp));
}

HttpResponse Harness::wait_upstream(const std::string& id, const std::string& query) {
  return get(upstream(id).port, "/control/wait?" + query + "&timeout_ms=5000");
}

std::string chat_body(bool stream, int max_tokens, const std::string& extra) {
  return std::string(R"({"model":"test-model","messages":[{"role":"user","content":"Hello there"}],"stream":)") +
         (stream ? "true" : "false") + ",\"max_tokens\":" + std::to_string(max_tokens) + extra + "}";
}

RefusingPort::RefusingPort() {
  fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  address.sin_port = 0;
  if (::bind(fd_, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0) {
    throw std::runtime_error("bind failed");
  }
  socklen_t length = sizeof address;
  ::getsockname(fd_, reinterpret_cast<sockaddr*>(&address), &length);
  port_ = ntohs(address.sin_port);
}

RefusingPort::~RefusingPort() {
  ::close(fd_);
}

}  // namespace kvgate::testing
