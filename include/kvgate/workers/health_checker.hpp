#pragma once
// Active health checks: every interval, GET <path> on each worker with a
// timeout; 2xx is a pass. Runs on the control thread's io_context; the
// results go into WorkerState (atomics) where the I/O threads read them.
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "kvgate/config/options.hpp"
#include "kvgate/http/beast.hpp"
#include "kvgate/workers/periodic_rounds.hpp"
#include "kvgate/workers/worker_state.hpp"

namespace kvgate::workers {

class HealthChecker {
 public:
  explicit HealthChecker(http::asio::io_context& io) : io_(io), rounds_(io) {}

  // Replaces the checked set (start-up and every reload). Control thread only.
  void watch(std::vector<std::shared_ptr<WorkerState>> workers, const config::HealthCheckOptions& options,
             const HealthThresholds& thresholds);
  void stop() { rounds_.stop(); }

 private:
  http::awaitable<void> check(std::shared_ptr<WorkerState> worker, std::shared_ptr<const bool> stopped,
                              config::HealthCheckOptions options, HealthThresholds thresholds);

  http::asio::io_context& io_;
  PeriodicRounds rounds_;
};

struct FetchedPage {
  unsigned status = 0;
  std::string body;
};
// One GET against a worker (new connection, closed after); empty on any
// connect, timeout, parse or size failure.
http::awaitable<std::optional<FetchedPage>> fetch_http(http::asio::io_context& io, const HttpUrl& endpoint,
                                                       const std::string& path, Milliseconds timeout,
                                                       std::uint64_t body_limit);

// One GET against a worker; true for a 2xx answer within the timeout.
http::awaitable<bool> probe_http(http::asio::io_context& io, const HttpUrl& endpoint, const std::string& path,
                                 Milliseconds timeout);

}  // namespace kvgate::workers
