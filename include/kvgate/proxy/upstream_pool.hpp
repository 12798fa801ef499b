#pragma once
// Keep-alive connections to workers, one pool per I/O thread. A pool and its
// connections belong to that thread's io_context and are never touched from
// another thread, so nothing here locks.
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "kvgate/core/result.hpp"
#include "kvgate/core/units.hpp"
#include "kvgate/http/beast.hpp"
#include "kvgate/http/deadline_stream.hpp"
#include "kvgate/workers/worker_state.hpp"

namespace kvgate::proxy {

// Held by pointer: a DeadlineStream stays where it is (its sweeper lists it
// by address), and a pointer moves freely between the pool and a request.
using UpstreamStream = std::unique_ptr<http::DeadlineStream>;

struct UpstreamConnection {
  UpstreamStream stream;
  bool reused = false;  // came from the pool: may have been closed by the worker meanwhile
};

class UpstreamPool {
 public:
  UpstreamPool(http::asio::io_context& io, std::uint32_t max_idle_per_worker, Milliseconds idle_timeout)
      : io_(io), max_idle_per_worker_(max_idle_per_worker), idle_timeout_(idle_timeout) {}

  // A live pooled connection to the worker if there is one, else a new one.
  http::awaitable<Result<UpstreamConnection, http::error_code>> acquire(const workers::WorkerState& worker,
                                                                        Milliseconds connect_timeout);
  http::awaitable<Result<UpstreamConnection, http::error_code>> connect(const workers::WorkerState& worker,
                                                                        Milliseconds connect_timeout);

  // Returns a connection whose last response was read completely.
  void release(const workers::WorkerState& worker, UpstreamStream stream);

  void set_limits(std::uint32_t max_idle_per_worker, Milliseconds idle_timeout) {
    max_idle_per_worker_ = max_idle_per_worker;
    idle_timeout_ = idle_timeout;
  }

 private:
  struct Idle {
    UpstreamStream stream;
    std::chrono::steady_clock::time_point since;
  };

  http::asio::io_context& io_;
  std::uint32_t max_idle_per_worker_;
  Milliseconds idle_timeout_;
  std::unordered_map<std::string, std::vector<Idle>> idle_;  // key: worker URL
};

}  // namespace kvgate::proxy
