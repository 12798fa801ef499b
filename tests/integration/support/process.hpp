#pragma once
// A child process for integration tests: started with posix_spawn, its
// stdout read line by line through a pipe (servers announce their port
// there), its stderr kept in a file for failure messages, stopped by PID.
// Waiting uses poll() on the pipe and a pidfd: no sleeps.
#include <sys/types.h>

#include <chrono>
#include <optional>
#include <string>
#include <vector>

namespace kvgate::testing {

class ChildProcess {
 public:
  ChildProcess(std::vector<std::string> argv, std::string stderr_path);
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;
  ~ChildProcess();

  // The next stdout line that starts with `prefix`; throws on timeout or EOF.
  std::string wait_for_line(const std::string& prefix, std::chrono::milliseconds timeout);

  void send_signal(int signal) const;
  // Exit status once the process ended within `timeout`.
  std::optional<int> wait_exit(std::chrono::milliseconds timeout);
  // SIGTERM, then SIGKILL if it does not end within `grace`.
  void stop(std::chrono::milliseconds grace = std::chrono::milliseconds(5000));

  [[nodiscard]] pid_t pid() const { return pid_; }
  [[nodiscard]] std::string stderr_text() const;

 private:
  pid_t pid_ = -1;
  int stdout_fd_ = -1;
  int pid_fd_ = -1;
  std::string stderr_path_;
  std::string pending_;
  std::optional<int> exit_status_;
};

// An unused TCP port on 127.0.0.1, for a server that takes a port number
// rather than announcing one it chose (llama-server, a peer restarted on
// its own port).
int free_loopback_port();

// "listening 127.0.0.1:PORT" -> PORT (kvgate-test-upstream's announcement).
int port_from_listening_line(const std::string& line);

}  // namespace kvgate::testing
