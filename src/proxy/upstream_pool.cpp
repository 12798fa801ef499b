#include "kvgate/proxy/upstream_pool.hpp"

#include <sys/socket.h>

#include <cerrno>

namespace kvgate::proxy {
namespace {

using namespace kvgate::http;

// A pooled connection is usable only if the worker has not closed it and has
// not sent anything unasked; a non-blocking peek tells both without waiting.
// It costs a system call, so only connections idle for longer than
// kUncheckedIdle are peeked: engines close idle connections after seconds
// (uvicorn's keep-alive timeout, vLLM's and SGLang's server, is 5 s), and a
// connection closed sooner (a restarted worker) fails before any response
// byte, which the forwarder retries on a fresh connection.
constexpr auto kUncheckedIdle = std::chrono::seconds(1);

bool still_open(http::DeadlineStream& stream) {
  char byte = 0;
  auto received = ::recv(stream.socket().native_handle(), &byte, 1, MSG_PEEK | MSG_DONTWAIT);
  return received < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
}

}  // namespace

awaitable<Result<UpstreamConnection, error_code>> UpstreamPool::acquire(const workers::WorkerState& worker,
                                                                        Milliseconds connect_timeout) {
  auto found = idle_.find(worker.url());
  if (found != idle_.end()) {
    auto& connections = found->second;
    const auto now = std::chrono::steady_clock::now();
    while (!connections.empty()) {
      Idle idle = std::move(connections.back());
      connections.pop_back();
      const auto idle_for = now - idle.since;
      if (idle_for < idle_timeout_ && (idle_for < kUncheckedIdle || still_open(*idle.stream))) {
        co_return UpstreamConnection{std::move(idle.stream), true};
      }
    }
  }
  co_return co_await connect(worker, connect_timeout);
}

awaitable<Result<UpstreamConnection, error_code>> UpstreamPool::connect(const workers::WorkerState& worker,
                                                                        Milliseconds connect_timeout) {
  const auto& authority = worker.endpoint().authority;
  auto owned = std::make_unique<http::DeadlineStream>(io_);
  auto& stream = *owned;
  stream.expires_after(connect_timeout);
  error_code error;
  auto address = asio::ip::make_address(authority.host, error);
  if (!error) {
    auto [connect_error] = co_await stream.async_connect(tcp::endpoint(address, authority.port), use_nothrow);
    error = connect_error;
  } else {
    // A host name (e.g. a Kubernetes service): resolved per new connection
    // so that a changed address is picked up; pooled connections skip this.
    tcp::resolver resolver(io_);
    auto [resolve_error, results] =
        co_await resolver.async_resolve(authority.host, std::to_string(authority.port), use_nothrow);
    error = resolve_error;
    if (!error) {
      auto [connect_error, endpoint] = co_await stream.async_connect(results, use_nothrow);
      error = connect_error;
    }
  }
  if (error) {
    co_return unexpected(error);
  }
  stream.expires_never();
  stream.socket().set_option(tcp::no_delay(true), error);
  co_return UpstreamConnection{std::move(owned), false};
}

void UpstreamPool::release(const workers::WorkerState& worker, UpstreamStream stream) {
  auto& connections = idle_[worker.url()];
  if (connections.size() >= max_idle_per_worker_) {
    return;  // the stream closes as it goes out of scope
  }
  stream->expires_never();
  connections.push_back(Idle{std::move(stream), std::chrono::steady_clock::now()});
}

}  // namespace kvgate::proxy
