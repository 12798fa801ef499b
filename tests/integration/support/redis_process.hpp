#pragma once
// A real redis-server (Debian's, scripts/setup.sh test installs it) as a
// child process on a free loopback port, without persistence; and a
// minimal RESP client for what the tests write to it directly (a hostile
// peer's messages). Ready when it answers PING; stopped by PID.
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

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

namespace kvgate::testing {

// One command over a fresh connection; returns the reply's first line
// ("+PONG", ":1", "$-1", "-ERR ..."); empty when nothing answers.
inline std::string redis_command(int port, const std::vector<std::string>& args) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) {
    return {};
  }
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<std::uint16_t>(port));
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  timeval timeout{2, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
  std::string reply;
  if (::connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0) {
    std::string request = "*" + std::to_string(args.size()) + "\r\n";
    for (const auto& arg : args) {
      request += "$" + std::to_string(arg.size()) + "\r\n" + arg + "\r\n";
    }
    if (::send(fd, request.data(), request.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(request.size())) {
      char byte = 0;
      while (::recv(fd, &byte, 1, 0) == 1 && byte != '\r') {
        reply.push_back(byte);
      }
    }
  }
  ::close(fd);
  return reply;
}

class RedisProcess {
 public:
  // `port` 0: a free one (a restart passes the old one).
  explicit RedisProcess(Harness& harness, int port = 0) {
    constexpr const char* kBinary = "/usr/bin/redis-server";
    if (!std::filesystem::exists(kBinary)) {
      throw std::runtime_error("no redis-server: run scripts/setup.sh test");
    }
    port_ = port != 0 ? port : free_loopback_port();
    process_ = std::make_unique<ChildProcess>(
        std::vector<std::string>{kBinary, "--port", std::to_string(port_), "--bind", "127.0.0.1", "--save", "",
                                 "--appendonly", "no", "--protected-mode", "no"},
        harness.folder() + "/redis-" + std::to_string(port_) + ".stderr");
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (redis_command(port_, {"PING"}) != "+PONG") {
      if (process_->wait_exit(std::chrono::milliseconds(0)).has_value() ||
          std::chrono::steady_clock::now() > deadline) {
        throw std::runtime_error("redis-server did not start: " + process_->stderr_text());
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));  // start-up poll: it announces nothing we read
    }
  }

  [[nodiscard]] int port() const { return port_; }
  [[nodiscard]] std::string url() const { return "redis://127.0.0.1:" + std::to_string(port_); }
  // SIGKILL: the engine gone without a goodbye.
  void kill() {
    process_->send_signal(SIGKILL);
    process_->wait_exit(std::chrono::seconds(5));
  }

 private:
  int port_ = 0;
  std::unique_ptr<ChildProcess> process_;
};

}  // namespace kvgate::testing
