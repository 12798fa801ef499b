#pragma once
// What a cluster replica shows of itself and its peers (/debug/cluster,
// the status page): plain values, copied out of the cluster's threads.
#include <cstdint>
#include <string>
#include <vector>

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

struct ClusterStatus {
  std::string replica_id;
  std::string engine;  // redis://host:port
  std::string stream;
  bool connected = false;
  std::string last_applied_id;  // the stream entry read last
  std::vector<PeerStatus> peers;
  std::uint64_t published = 0;
  std::uint64_t applied = 0;
  std::uint64_t dropped = 0;
  std::size_t queued = 0;  // waiting to be published
};

}  // namespace kvgate::cluster
