#pragma once
// The admin listener's `GET /`: one self-contained HTML page (inline CSS and
// SVG, no script, no external asset) that an operator can open in a browser
// next to Grafana. It reloads itself every few seconds (meta refresh), so it
// works through any port-forward or proxy that passes plain GETs.
//
// Pure: the page is a function of a StatusView the admin handler gathers
// from the gateway's shared state; every text from a client, an engine or
// the configuration is escaped.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "kvgate/cluster/cluster_status.hpp"
#include "kvgate/core/html.hpp"
#include "kvgate/obs/recent_activity.hpp"
#include "kvgate/route/session_table.hpp"

namespace kvgate::admin {

struct WorkerRow {
  std::string id;
  std::string model;
  std::string role;  // prefill or decode; empty: an aggregated worker (both)
  std::string url;
  bool healthy = false;
  bool ejected = false;
  std::string mode;    // events, stale, approximate (as /debug/workers)
  std::string events;  // connected, disconnected, silent, none
  std::uint32_t in_flight = 0;
  std::uint32_t peer_in_flight = 0;      // the cluster's other replicas' (cluster:)
  std::optional<double> engine_waiting;  // scraped from the engine
  std::optional<double> engine_running;
  std::optional<double> kv_usage;  // 0..1
  std::optional<double> recent_ttft_ms;
  // Realized over expected first tokens: median and p90 (absent before
  // the first priced streamed answer).
  std::optional<double> ttft_ratio_p50;
  std::optional<double> ttft_ratio_p90;
  std::size_t index_blocks = 0;
  bool drifting = false;
};

struct StatusView {
  std::string version;
  std::string policy;
  std::uint64_t now_ms = 0;       // monotonic: the sessions' stamps
  std::uint64_t now_unix_ms = 0;  // the recent requests' stamps
  bool draining = false;
  unsigned refresh_seconds = 5;
  std::vector<WorkerRow> workers;
  std::vector<obs::HitBucket> hit_buckets;  // oldest first
  std::uint64_t bucket_ms = 0;
  std::vector<obs::RoutedRequest> recent;  // newest first
  std::vector<route::SessionTable::Summary> sessions;
  std::optional<cluster::ClusterStatus> cluster;  // empty: this kvgate runs alone
};

std::string render_status_page(const StatusView& view);

}  // namespace kvgate::admin
