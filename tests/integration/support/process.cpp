#include "process.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <fstream>
#include <sstream>
#include <stdexcept>

extern char** environ;

namespace kvgate::testing {
namespace {

using Clock = std::chrono::steady_clock;

int remaining_ms(Clock::time_point deadline) {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
  return left < 0 ? 0 : static_cast<int>(left);
}

}  // namespace

ChildProcess::ChildProcess(std::vector<std::string> argv, std::string stderr_path)
    : stderr_path_(std::move(stderr_path)) {
  int pipe_fds[2];
  if (::pipe2(pipe_fds, O_CLOEXEC) != 0) {
    throw std::runtime_error("pipe2 failed");
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, pipe_fds[1], STDOUT_FILENO);
  posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, stderr_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  std::vector<char*> raw;
  for (auto& arg : argv) {
    raw.push_back(arg.data());
  }
  raw.push_back(nullptr);
  int failed = posix_spawn(&pid_, raw[0], &actions, nullptr, raw.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  ::close(pipe_fds[1]);
  if (failed != 0) {
    ::close(pipe_fds[0]);
    throw std::runtime_error("cannot start " + argv[0]);
  }
  stdout_fd_ = pipe_fds[0];
  pid_fd_ = static_cast<int>(::syscall(SYS_pidfd_open, pid_, 0));
}

ChildProcess::~ChildProcess() {
  stop();
  if (stdout_fd_ >= 0) {
    ::close(stdout_fd_);
  }
  if (pid_fd_ >= 0) {
    ::close(pid_fd_);
  }
}

std::string ChildProcess::wait_for_line(const std::string& prefix, std::chrono::milliseconds timeout) {
  auto deadline = Clock::now() + timeout;
  for (;;) {
    for (auto newline = pending_.find('\n'); newline != std::string::npos; newline = pending_.find('\n')) {
      auto line = pending_.substr(0, newline);
      pending_.erase(0, newline + 1);
      if (line.starts_with(prefix)) {
        return line;
      }
    }
    pollfd descriptor{stdout_fd_, POLLIN, 0};
    if (::poll(&descriptor, 1, remaining_ms(deadline)) <= 0) {
      throw std::runtime_error("timed out waiting for '" + prefix + "'; stderr:\n" + stderr_text());
    }
    char chunk[4096];
    auto received = ::read(stdout_fd_, chunk, sizeof chunk);
    if (received <= 0) {
      throw std::runtime_error("process ended before printing '" + prefix + "'; stderr:\n" + stderr_text());
    }
    pending_.append(chunk, static_cast<std::size_t>(received));
  }
}

void ChildProcess::send_signal(int signal) const {
  if (pid_ > 0 && !exit_status_) {
    ::kill(pid_, signal);
  }
}

std::optional<int> ChildProcess::wait_exit(std::chrono::milliseconds timeout) {
  if (exit_status_ || pid_ <= 0) {
    return exit_status_;
  }
  pollfd descriptor{pid_fd_, POLLIN, 0};
  if (::poll(&descriptor, 1, static_cast<int>(timeout.count())) <= 0) {
    return std::nullopt;
  }
  int status = 0;
  if (::waitpid(pid_, &status, 0) == pid_) {
    exit_status_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }
  return exit_status_;
}

void ChildProcess::stop(std::chrono::milliseconds grace) {
  if (pid_ <= 0 || exit_status_) {
    return;
  }
  send_signal(SIGTERM);
  if (!wait_exit(grace)) {
    send_signal(SIGKILL);
    wait_exit(std::chrono::milliseconds(5000));
  }
}

std::string ChildProcess::stderr_text() const {
  std::ifstream file(stderr_path_);
  std::stringstream text;
  text << file.rdbuf();
  return text.str();
}

int free_loopback_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof address;
  ::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof address);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length);
  ::close(fd);
  return ntohs(address.sin_port);
}

int port_from_listening_line(const std::string& line) {
  return std::stoi(line.substr(line.rfind(':') + 1));
}

}  // namespace kvgate::testing
