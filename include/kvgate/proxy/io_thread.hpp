#pragma once
// One I/O thread's share of the data plane: an io_context, an acceptor on the
// shared listen port (SO_REUSEPORT lets the kernel spread connections), the
// thread's upstream connection pool and the set of its client connections.
// Everything here is touched only from the thread running io(); the methods
// meant for other threads say so and post to it.
#include <memory>
#include <unordered_set>

#include "kvgate/gateway/context.hpp"
#include "kvgate/http/beast.hpp"
#include "kvgate/proxy/admission_gate.hpp"
#include "kvgate/proxy/request_stats.hpp"
#include "kvgate/proxy/upstream_pool.hpp"
#include "kvgate/workers/retry_budget.hpp"

namespace kvgate::proxy {

class ClientSession;

class IoThread {
 public:
  // `admission` and `stats` are shared by every I/O thread (each is
  // thread-safe).
  IoThread(gateway::GatewayContext& context, AdmissionGate& admission, RequestStats& stats,
           const config::Options& options);

  http::asio::io_context& io() { return io_; }
  gateway::GatewayContext& context() { return context_; }
  AdmissionGate& admission() { return admission_; }
  UpstreamPool& pool() { return pool_; }
  ThreadStats& stats() { return stats_; }
  workers::RetryBudget& retry_budget() { return retry_budget_; }
  // The routing table and decision log in force, as this thread last saw
  // them (one atomic load while unchanged).
  const std::shared_ptr<const route::RoutingTable>& table() { return table_.current(); }
  const std::shared_ptr<obs::DecisionLog>& decision_log() { return decision_log_.current(); }

  // Binds the listen socket (before run()); returns the bound endpoint, so the
  // first thread can bind port 0 and the others the port it got.
  Result<http::tcp::endpoint, std::string> bind(const http::tcp::endpoint& endpoint);
  void start_accepting();

  // Thread-safe: posts to this thread.
  void stop_accepting();
  void close_idle_connections();
  void apply_pool_limits(std::uint32_t max_idle, Milliseconds idle_timeout);

  // Session bookkeeping (this thread only).
  void add(ClientSession* session) { sessions_.insert(session); }
  void remove(ClientSession* session) { sessions_.erase(session); }

 private:
  http::awaitable<void> accept_loop();

  gateway::GatewayContext& context_;
  AdmissionGate& admission_;
  // Declared before io_: destroying io_ destroys the sessions' coroutine
  // frames, and each session removes itself from this set.
  std::unordered_set<ClientSession*> sessions_;
  // Concurrency hint 1: one thread runs it. Asio still locks (other threads
  // post to it); turning the per-socket locks off measured within noise.
  http::asio::io_context io_{1};
  http::tcp::acceptor acceptor_{io_};
  UpstreamPool pool_;
  ThreadStats stats_;
  workers::RetryBudget retry_budget_;
  Published<const route::RoutingTable>::Reader table_;
  Published<obs::DecisionLog>::Reader decision_log_;
};

}  // namespace kvgate::proxy
