#include "kvgate/cluster/cluster_stats.hpp"

#include <string>

namespace kvgate::cluster {

namespace {

prometheus::Histogram::BucketBoundaries lag_buckets() {
  return {0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10};
}

}  // namespace

ClusterStats::ClusterStats(prometheus::Registry& registry)
    : lag_(prometheus::BuildHistogram()
               .Name("kvgate_cluster_apply_lag_seconds")
               .Help("From a peer replica's publishing of a message to this replica's applying it (wall clocks)")
               .Register(registry)
               .Add({}, lag_buckets())),
      connected_(prometheus::BuildGauge()
                     .Name("kvgate_cluster_engine_connected")
                     .Help("1 while this replica reaches the cluster's engine (Redis); 0 alone or cut off")
                     .Register(registry)
                     .Add({})),
      peers_(prometheus::BuildGauge()
                 .Name("kvgate_cluster_peers")
                 .Help("Other replicas of the cluster heard from within cluster.peer_timeout")
                 .Register(registry)
                 .Add({})) {
  auto& published = prometheus::BuildCounter()
                        .Name("kvgate_cluster_messages_published_total")
                        .Help("Messages this replica appended to the cluster's stream, by kind")
                        .Register(registry);
  auto& applied = prometheus::BuildCounter()
                      .Name("kvgate_cluster_messages_applied_total")
                      .Help("Peer replicas' messages this replica applied, by kind")
                      .Register(registry);
  for (auto kind : kMessageKinds) {
    published_[index(kind)] = &published.Add({{"kind", std::string(to_string(kind))}});
    applied_[index(kind)] = &applied.Add({{"kind", std::string(to_string(kind))}});
  }
  auto& dropped = prometheus::BuildCounter()
                      .Name("kvgate_cluster_messages_dropped_total")
                      .Help(
                          "Messages not published (queue_full, engine_down) or not applied (malformed, "
                          "unknown_version, unknown_model, unknown_worker, stale), by reason")
                      .Register(registry);
  for (auto reason : kDropReasons) {
    dropped_[static_cast<std::size_t>(reason)] = &dropped.Add({{"reason", std::string(to_string(reason))}});
  }
}

}  // namespace kvgate::cluster
