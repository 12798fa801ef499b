#include "kvgate/workers/periodic_rounds.hpp"

namespace kvgate::workers {

using namespace kvgate::http;

struct PeriodicRounds::Rounds {
  Rounds(asio::io_context& io, std::vector<std::shared_ptr<WorkerState>> watched, Milliseconds every, Visit action)
      : workers(std::move(watched)), interval(every), visit(std::move(action)), timer(io) {}
  std::vector<std::shared_ptr<WorkerState>> workers;
  Milliseconds interval;
  Visit visit;  // owned here: a visit's coroutine keeps the Rounds alive while it runs
  asio::steady_timer timer;
  std::shared_ptr<bool> stopped = std::make_shared<bool>(false);
};

void PeriodicRounds::start(std::vector<std::shared_ptr<WorkerState>> workers, Milliseconds interval, Visit visit) {
  stop();
  current_ = std::make_shared<Rounds>(io_, std::move(workers), interval, std::move(visit));
  asio::co_spawn(io_, schedule(current_), [](const std::exception_ptr&) {});
}

void PeriodicRounds::stop() {
  if (current_) {
    *current_->stopped = true;
    current_->timer.cancel();
    current_.reset();
  }
}

awaitable<void> PeriodicRounds::schedule(std::shared_ptr<Rounds> rounds) {
  while (!*rounds->stopped) {
    for (const auto& worker : rounds->workers) {
      asio::co_spawn(io_, visit_one(rounds, worker), [](const std::exception_ptr&) {});
    }
    rounds->timer.expires_after(rounds->interval);
    co_await rounds->timer.async_wait(use_nothrow);
  }
}

awaitable<void> PeriodicRounds::visit_one(std::shared_ptr<Rounds> rounds, std::shared_ptr<WorkerState> worker) {
  co_await rounds->visit(std::move(worker), rounds->stopped);
}

}  // namespace kvgate::workers
