#pragma once
// The cluster's series (kvgate_cluster_*). Declared whether or not a
// cluster is configured, every kind and reason at 0, so dashboards and
// alerts find them on any kvgate. Written by the cluster's threads and the
// I/O threads that publish (prometheus-cpp's series are atomics).
#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include <array>

#include "kvgate/cluster/message.hpp"

namespace kvgate::cluster {

class ClusterStats {
 public:
  explicit ClusterStats(prometheus::Registry& registry);

  void published(MessageKind kind) { published_[index(kind)]->Increment(); }
  void applied(MessageKind kind) { applied_[index(kind)]->Increment(); }
  void dropped(DropReason reason) { dropped_[static_cast<std::size_t>(reason)]->Increment(); }
  void lag(double seconds) { lag_.Observe(seconds); }
  void set_connected(bool connected) { connected_.Set(connected ? 1 : 0); }
  void set_peers(std::size_t live) { peers_.Set(static_cast<double>(live)); }

 private:
  static std::size_t index(MessageKind kind) { return static_cast<std::size_t>(kind) - 1; }
  std::array<prometheus::Counter*, std::size(kMessageKinds)> published_{};
  std::array<prometheus::Counter*, std::size(kMessageKinds)> applied_{};
  std::array<prometheus::Counter*, std::size(kDropReasons)> dropped_{};
  prometheus::Histogram& lag_;
  prometheus::Gauge& connected_;
  prometheus::Gauge& peers_;
};

}  // namespace kvgate::cluster
