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

#include "kvgate/cluster/message.hpp"
#include "kvgate/workers/worker_state.hpp"

namespace kvgate::cluster {

struct PeerStatus {
  std::string id;
  std::uint64_t last_heard_ms = 0;  // monotonic
  double last_lag_ms = 0;           // its last message: sent to applied, on the wall clocks
  std::uint64_t applied = 0;
  std::uint64_t dropped = 0;
  bool live = false;            // heard within peer_timeout
  std::uint32_t in_flight = 0;  // what its last load report said, over every worker
};

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

  // The live peers' counts summed per (model, worker).
  using Key = std::pair<std::string, std::string>;
  [[nodiscard]] std::map<Key, workers::LoadCounters::PeerCounts> sums(std::uint64_t now_ms) const;

  [[nodiscard]] std::vector<PeerStatus> status(std::uint64_t now_ms) const;
  [[nodiscard]] std::size_t live(std::uint64_t now_ms) const;

 private:
  struct Peer {
    PeerStatus status;
    bool silent_reported = false;
    std::map<Key, workers::LoadCounters::PeerCounts> load;
  };
  [[nodiscard]] bool is_live(const Peer& peer, std::uint64_t now_ms) const {
    return now_ms <= peer.status.last_heard_ms + timeout_ms_;
  }
  Peer& peer(std::string_view id);

  std::uint64_t timeout_ms_;
  std::map<std::string, Peer, std::less<>> peers_;
};

}  // namespace kvgate::cluster
