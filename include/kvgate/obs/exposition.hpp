#pragma once
// The gateway's Prometheus registry and its text exposition. Each component
// declares its own series beside its code (Envoy's per-component stats):
// the request path's in proxy/request_stats.hpp, admission's in
// proxy/admission_gate.hpp, sessions' in route/session_stats.hpp, discovery's
// in discovery/discoverer.hpp, the index writer's in kv_events/ingestion.hpp,
// reloads' in app/gateway.hpp, and every worker-labelled series in
// obs/worker_series.hpp. They register in registry(); serialize() merges
// them with the series of the workers in force.
//
// Conventions: prefix kvgate_, unit in the name, counters end in _total.
// Label values known in advance (a model's reasons, error codes, a tenant's
// refusals) are declared at 0 when the configuration is installed, so a
// fresh gateway exposes every family its dashboard and alerts query.
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>

#include "kvgate/obs/worker_series.hpp"

namespace kvgate::obs {

class Exposition {
 public:
  Exposition();

  // Where components register their families (prometheus-cpp's registry
  // is thread-safe).
  prometheus::Registry& registry() { return *registry_; }

  // Prometheus text exposition: the registry's series and those of
  // `workers` (the workers of the routing table in force: a worker that left
  // it is not shown, whoever still holds its series).
  [[nodiscard]] std::string serialize(std::span<const WorkerSeries* const> workers = {}) const;

 private:
  std::shared_ptr<prometheus::Registry> registry_;
};

// Label children by a string key, looked up with a string_view (no copy of
// a reused key buffer per lookup): per-thread handle tables.
struct SeriesKeyHash {
  using is_transparent = void;
  std::size_t operator()(std::string_view key) const { return std::hash<std::string_view>{}(key); }
};
template <class Handles>
using SeriesMap = std::unordered_map<std::string, Handles, SeriesKeyHash, std::equal_to<>>;

// An HTTP status as a label value ("none": no response was sent).
std::string status_label(int status);

// Ratios of cached to prompt tokens.
const prometheus::Histogram::BucketBoundaries& ratio_buckets();

}  // namespace kvgate::obs
