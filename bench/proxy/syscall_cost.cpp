// What one system call costs on this machine, for reading the proxy's
// system-call counts (KVGATE_SYSCALLS=1 bench/proxy/run.sh): an empty one
// (getppid), a receive that finds nothing (what Asio's first try of a read
// on a quiet socket costs) and an epoll_ctl re-arm (what a readiness wait
// costs instead). Standalone, built by bench/proxy/syscall_cost.sh.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <functional>

namespace {

constexpr int kCalls = 1'000'000;

double nanoseconds_per_call(const std::function<void()>& call) {
  const auto start = std::chrono::steady_clock::now();
  for (int index = 0; index < kCalls; ++index) {
    call();
  }
  const std::chrono::duration<double, std::nano> elapsed = std::chrono::steady_clock::now() - start;
  return elapsed.count() / kCalls;
}

}  // namespace

int main() {
  const int listener = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof address;
  if (bind(listener, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0 || listen(listener, 1) != 0 ||
      getsockname(listener, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
    std::perror("listen on 127.0.0.1");
    return 1;
  }
  const int client = socket(AF_INET, SOCK_STREAM, 0);
  if (connect(client, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0) {
    std::perror("connect");
    return 1;
  }
  const int server = accept(listener, nullptr, nullptr);
  fcntl(server, F_SETFL, O_NONBLOCK);
  const int poller = epoll_create1(0);
  epoll_event event{};
  event.events = EPOLLIN | EPOLLET;
  event.data.fd = server;
  epoll_ctl(poller, EPOLL_CTL_ADD, server, &event);

  char byte = 0;
  std::printf("getppid: %.0f ns\n", nanoseconds_per_call([] { getppid(); }));
  std::printf("recv that finds nothing (EAGAIN): %.0f ns\n",
              nanoseconds_per_call([&] { (void)recv(server, &byte, 1, 0); }));
  std::printf("epoll_ctl re-arm (EPOLL_CTL_MOD): %.0f ns\n",
              nanoseconds_per_call([&] { epoll_ctl(poller, EPOLL_CTL_MOD, server, &event); }));
  close(poller);
  close(server);
  close(client);
  close(listener);
  return 0;
}
