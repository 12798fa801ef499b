#pragma once
// What this replica knows of the other replicas of its cluster: when each
// was last heard from, how late its messages arrive, what it last reported
// in flight on each worker. Pure: time is an input (the monotonic clock,
// ms), nothing here reads a clock or a socket. Owned by the cluster's
// reader thread; others see copies (status()).
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "kvgate/cluster/cluster_status.hpp"
#include "kvgate/cluster/message.hpp"
#include "kvgate/workers/worker_state.hpp"

namespace kvgate::cluster {

class PeerTable {
 public:
  explicit PeerTable(std::uint64_t peer_timeout_ms) : timeout_ms_(peer_timeout_ms) {}

  // A message from `from` arrived; `lag_ms` from its send to now.
  void heard(std::string_view from, std::uint64_t now_ms, double lag_ms);
  void applied(std::string_view from);
  void dropped(std::string_view from);
  // Its in-flight counts now (replacing the last report).
  void report_load(std::string_view from, const LoadMessage& load, std::uint64_t now_ms);

  // Peers that went silent since the last call (each named once per silence).
  std::vector<std::string> newly_silent(std::uint64_t now_ms);

  // The live peers' counts summed per worker id.
  using Sums = std::map<std::string, workers::LoadCounters::PeerCounts, std::less<>>;
  [[nodiscard]] Sums sums(std::uint64_t now_ms) const;

  [[nodiscard]] std::vector<PeerStatus> status(std::uint64_t now_ms) const;
  [[nodiscard]] std::size_t live(std::uint64_t now_ms) const;

 private:
  struct Peer {
    PeerStatus status;
    bool silent_reported = false;
    Sums load;
  };
  [[nodiscard]] bool is_live(const Peer& peer, std::uint64_t now_ms) const {
    return now_ms <= peer.status.last_heard_ms + timeout_ms_;
  }
  Peer& peer(std::string_view id);

  std::uint64_t timeout_ms_;
  std::map<std::string, Peer, std::less<>> peers_;
};

}  // namespace kvgate::cluster
