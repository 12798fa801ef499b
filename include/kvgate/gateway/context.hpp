#pragma once
// State shared by every I/O thread and the control thread. Concurrency
// scheme: the routing table is an immutable snapshot replaced whole on
// reload (core/published.hpp: each I/O thread's reader costs one atomic
// load per request, and never blocks the reload); counters are atomics; series
// are prometheus-cpp's own thread-safe objects; the router's session table
// locks one shard per call (route/session_table.hpp). Admission, which the
// data plane alone uses, is the I/O threads' own (proxy/admission_gate.hpp).
// Nothing else is shared. Both front doors (the data plane, proxy/) and the
// admin plane (admin/) read it; it knows neither.
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>

#include "kvgate/cluster/cluster.hpp"
#include "kvgate/core/published.hpp"
#include "kvgate/kv_events/index_writer.hpp"
#include "kvgate/obs/decision_log.hpp"
#include "kvgate/obs/exposition.hpp"
#include "kvgate/obs/recent_activity.hpp"
#include "kvgate/route/router.hpp"
#include "kvgate/route/routing_table.hpp"
#include "kvgate/route/session_stats.hpp"
#include "kvgate/route/session_table.hpp"

namespace kvgate::gateway {

class GatewayContext {
 public:
  explicit GatewayContext(obs::Exposition& exposition)
      : exposition_(exposition), session_stats_(exposition.registry()), router_(sessions_, session_stats_) {}

  [[nodiscard]] std::shared_ptr<const route::RoutingTable> table() const { return table_.load(); }
  // For a thread that reads the table per request (Published::Reader).
  [[nodiscard]] const Published<const route::RoutingTable>& tables() const { return table_; }
  void publish(std::shared_ptr<const route::RoutingTable> table) {
    sessions_.set_limits(session_limits(table->options->sessions));
    table_.store(std::move(table));
  }

  route::Router& router() { return router_; }
  [[nodiscard]] const route::SessionTable& sessions() const { return sessions_; }
  route::SessionTable& sessions() { return sessions_; }

  // The cluster this replica belongs to (config: cluster); null: alone.
  // Set once before any I/O thread starts.
  void set_cluster(cluster::Cluster* cluster) {
    cluster_ = cluster;
    router_.set_peer_publisher(cluster);
  }
  [[nodiscard]] const cluster::Cluster* cluster() const { return cluster_; }

  // The registry every component's series live in, and /metrics.
  obs::Exposition& exposition() { return exposition_; }
  route::SessionStats& session_stats() { return session_stats_; }
  // The last routed requests and the recent hit rate (the status page).
  obs::RecentActivity& activity() { return activity_; }

  // The index writer; set once before any I/O thread starts.
  void set_index_writer(kv_events::IndexWriter* writer) {
    index_writer_ = writer;
    router_.set_index_writer(writer);
  }
  [[nodiscard]] kv_events::IndexWriter* index_writer() const { return index_writer_; }

  // Empty when no decision_log is configured. Replaced on reload (which
  // reopens the file, so log rotation works with SIGHUP).
  [[nodiscard]] std::shared_ptr<obs::DecisionLog> decision_log() const { return decision_log_.load(); }
  [[nodiscard]] const Published<obs::DecisionLog>& decision_logs() const { return decision_log_; }
  void publish(std::shared_ptr<obs::DecisionLog> log) { decision_log_.store(std::move(log)); }

  // The sequence number of the next routing decision (rotation, ties): the
  // data plane takes one per decision; a dry run peeks at the next one, so
  // it explains what the next request would get.
  std::uint64_t next_decision_sequence() { return decision_sequence_.fetch_add(1, std::memory_order_relaxed); }
  [[nodiscard]] std::uint64_t peek_decision_sequence() const {
    return decision_sequence_.load(std::memory_order_relaxed);
  }

  [[nodiscard]] bool draining() const { return draining_.load(std::memory_order_acquire); }
  void start_draining() { draining_.store(true, std::memory_order_release); }

  // Connection accounting: the drain finishes when the last one closes.
  bool try_open_connection(std::uint32_t limit);
  void close_connection();
  [[nodiscard]] std::uint32_t open_connections() const { return open_connections_.load(); }
  // Called (from the closing connection's thread) when draining and the last
  // connection has closed. Set once, before any I/O thread starts.
  void on_drained(std::function<void()> callback) { on_drained_ = std::move(callback); }

 private:
  obs::Exposition& exposition_;
  kv_events::IndexWriter* index_writer_ = nullptr;
  cluster::Cluster* cluster_ = nullptr;
  static route::SessionLimits session_limits(const config::SessionOptions& options) {
    return {options.max_sessions, static_cast<std::uint64_t>(options.idle_ttl.count()), options.turns_kept};
  }

  route::SessionTable sessions_;
  route::SessionStats session_stats_;
  obs::RecentActivity activity_;
  route::Router router_;
  Published<const route::RoutingTable> table_;
  Published<obs::DecisionLog> decision_log_;
  std::atomic<std::uint64_t> decision_sequence_{0};
  std::atomic<bool> draining_{false};
  std::atomic<std::uint32_t> open_connections_{0};
  std::function<void()> on_drained_;
};

}  // namespace kvgate::gateway
