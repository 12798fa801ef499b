#pragma once
// Several kvgate replicas that behave as one (config: cluster). Each
// replica appends what it decides (session turns and their outcomes,
// routing-time inserts and withdrawals, freed slots, its in-flight counts
// per worker, what its answers taught of the workers' costs) to one Redis
// stream, and applies what the others append: a session's turns on any
// replica continue its history and stay on its worker; a prefix routed by
// one replica is credited by all; each prices the others' requests in
// flight; each learns a worker's slot wait, prefill cost and TTFT
// calibration from every replica's answers. The engines' own KV events
// stay per replica (each subscribes itself).
//
// The engine is never on the request path: the router hands messages to a
// bounded queue (cluster/outbox.hpp) that one publisher thread drains; one
// reader thread reads the stream and applies. When Redis is slow or gone,
// publishing drops (counted) and every replica routes on its own state,
// saying so once; on return, the reader resumes from the last entry it
// applied (or catch_up back, at start), so what the stream still holds is
// not lost.
//
// Threads: the route::PeerPublisher calls come from I/O threads (the
// outbox's lock); the publisher thread owns its Redis connection and the
// load snapshots; the reader thread owns its connection, the peer table,
// and is the only writer of the workers' peer counts. status() may be
// called from any thread.
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "kvgate/cluster/cluster_stats.hpp"
#include "kvgate/cluster/message.hpp"
#include "kvgate/cluster/outbox.hpp"
#include "kvgate/cluster/peer_table.hpp"
#include "kvgate/config/options.hpp"
#include "kvgate/core/published.hpp"
#include "kvgate/kv_events/index_writer.hpp"
#include "kvgate/route/peer_publisher.hpp"
#include "kvgate/route/routing_table.hpp"
#include "kvgate/route/session_table.hpp"

namespace kvgate::cluster {

// The replica id when the configuration gives none: <hostname>-<pid>.
std::string default_replica_id();

// A peer's request tickets, made distinct from this replica's own (which
// are decision sequence numbers, below 2^63) and from other peers'.
std::uint64_t peer_ticket(std::string_view peer, std::uint64_t ticket);

class Cluster final : public route::PeerPublisher {
 public:
  Cluster(const config::ClusterOptions& options, const Published<const route::RoutingTable>& tables,
          route::SessionTable& sessions, kv_events::IndexWriter* index_writer, ClusterStats& stats);
  ~Cluster() override;

  void start();
  void stop();

  [[nodiscard]] ClusterStatus status() const;
  [[nodiscard]] const std::string& replica_id() const { return replica_id_; }

  void turn(std::string_view model, std::string_view key, std::string_view key_source, const route::PeerTurn& turn,
            bool retry) override;
  void outcome(std::string_view model, std::string_view key, std::uint64_t number,
               const route::SessionTable::Outcome& outcome) override;
  void assumed(std::string_view model, std::string_view worker, std::span<const std::uint64_t> blocks,
               std::uint64_t ticket) override;
  void withdrawn(std::string_view model, std::string_view worker, std::span<const std::uint64_t> blocks,
                 std::uint64_t ticket) override;
  void finished(std::string_view model, std::string_view worker, std::uint64_t ticket) override;
  void learned(std::string_view model, std::string_view worker, const route::CostSample& sample) override;
  void answered(std::string_view key, std::uint64_t number, std::optional<std::uint32_t> answer_tokens) override;

 private:
  template <class Encode>
  void enqueue(MessageKind kind, Encode encode);
  void publish_turn(std::string_view model, std::string_view key, std::string_view key_source,
                    const route::PeerTurn& turn, bool retry);
  void publish_loop();
  void read_loop();
  // Applies one stream entry's bytes; `now_ms` monotonic, `unix_ms` wall.
  void apply(std::string_view bytes, std::uint64_t now_ms, std::uint64_t unix_ms);
  void apply_peer_counts(std::uint64_t now_ms);
  void engine_changed(bool up, std::string_view detail);

  config::ClusterOptions options_;
  std::string replica_id_;
  std::string url_text_;
  const Published<const route::RoutingTable>& tables_;
  route::SessionTable& sessions_;
  kv_events::IndexWriter* index_writer_;
  ClusterStats& stats_;
  Outbox outbox_;
  std::uint64_t started_unix_ms_;  // wall clock: lag is measured for messages sent since
  std::uint64_t incarnation_;      // this process among the replica id's (random)

  std::atomic<bool> stopping_{false};
  std::atomic<bool> engine_up_{false};
  std::atomic<bool> engine_reported_down_{false};
  std::atomic<std::uint64_t> published_{0};
  std::atomic<std::uint64_t> applied_{0};
  std::atomic<std::uint64_t> dropped_{0};
  std::thread publisher_;
  std::thread reader_;

  // The reader thread's; status() copies them under the lock.
  mutable std::mutex status_mutex_;
  PeerTable peers_;
  std::string last_id_;
};

}  // namespace kvgate::cluster
