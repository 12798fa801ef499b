#pragma once
// Visits every worker once per interval on one io_context (the control
// thread's): the loop the health checker and the metrics scraper share.
// start() replaces the running rounds (a reload); visits of the previous
// rounds still in flight see `stopped` turn true and drop their results.
#include <functional>
#include <memory>
#include <vector>

#include "kvgate/core/units.hpp"
#include "kvgate/http/beast.hpp"
#include "kvgate/workers/worker_state.hpp"

namespace kvgate::workers {

class PeriodicRounds {
 public:
  // `stopped` is true once these rounds were replaced or stopped: a visit
  // checks it after each wait before it records anything.
  using Visit =
      std::function<http::awaitable<void>(std::shared_ptr<WorkerState> worker, std::shared_ptr<const bool> stopped)>;

  explicit PeriodicRounds(http::asio::io_context& io) : io_(io) {}
  ~PeriodicRounds() { stop(); }
  PeriodicRounds(const PeriodicRounds&) = delete;
  PeriodicRounds& operator=(const PeriodicRounds&) = delete;

  void start(std::vector<std::shared_ptr<WorkerState>> workers, Milliseconds interval, Visit visit);
  void stop();

 private:
  struct Rounds;
  http::awaitable<void> schedule(std::shared_ptr<Rounds> rounds);
  static http::awaitable<void> visit_one(std::shared_ptr<Rounds> rounds, std::shared_ptr<WorkerState> worker);

  http::asio::io_context& io_;
  std::shared_ptr<Rounds> current_;
};

}  // namespace kvgate::workers
