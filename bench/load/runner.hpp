#pragma once
// Drives a workload against one target and records every request.
// - Sessions run closed loop: `concurrency` sessions at a time, each on its
//   own keep-alive connection, turn after turn; a turn's history holds the
//   answers the target actually gave, as a real chat client's would.
// - Sessions can instead start open loop at given times (the load dial's
//   Poisson arrivals), each on its own connection.
// - Traces run open loop: each request leaves at its arrival time (scaled),
//   whatever is still in flight, on an idle connection or a new one.
// One io_context on the calling thread; nothing is shared across threads.
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "dial.hpp"
#include "report.hpp"
#include "request_body.hpp"
#include "trajectory.hpp"
#include "workload.hpp"

namespace kvgate::load {

struct RunOptions {
  // Base URL, e.g. http://127.0.0.1:8080. Several gateways in front of the
  // same replicas: joined by '+' they take the requests in turn, a
  // session's consecutive turns on different gateways; joined by '|' they
  // take the sessions in turn, each session keeping its gateway
  // (an SDK client's keep-alive connection behind a Service that balances
  // connections). Trace requests, which have no session, always alternate.
  std::string target;
  std::string model;  // empty: the target's first model from GET /v1/models
  std::uint32_t concurrency = 8;
  double duration_seconds = 0;  // stop starting requests after this long (0: run the whole workload)
  // Sessions open loop: session i starts at session_starts_ms[i] (ms from
  // the run's start), whatever is in flight. Empty: closed loop.
  std::vector<double> session_starts_ms;
  // Block size, in prompt bytes, of the reuse ceiling (dial.hpp).
  std::uint32_t ceiling_block_bytes = 64;
  // Fields every request body carries beside the workload's own (an
  // object; e.g. a logit_bias that keeps a random-weights model's output
  // valid UTF-8). Empty: none.
  nlohmann::json request_fields = nlohmann::json::object();
  // Prepended to every session's key (x-session-id), so a run's sessions
  // are not taken for another run's of the same workload by a gateway
  // that served both (a warm-up's). Empty: the workload's own ids.
  std::string session_prefix;
  // Open loop: called on the run's thread right after the last arrival
  // (the caller reads the replicas' counters there), with the time since
  // the start in seconds.
  std::function<void(double)> on_last_arrival;
};

struct RunResult {
  std::string model;
  std::vector<RequestRecord> records;
  double wall_seconds = 0;
};

Result<RunResult, std::string> run_workload(const Workload& workload, const RunOptions& options);

// GET /v1/models on `target`: its first model's id.
Result<std::string, std::string> first_model(const std::string& target);

enum class TargetSpread { per_request, per_session };

// "URL+URL+..." or "URL|URL|..." -> the URLs (RunOptions::target).
std::vector<std::string> split_targets(std::string_view target);
// '|' anywhere in the target: per session.
TargetSpread target_spread(std::string_view target);

// One trajectory through one target, turn after turn (no think times: it
// runs alone, from reset caches).
struct TrajectoryOptions {
  std::string target;  // one base URL
  std::string model;
  TrajectoryMode mode = TrajectoryMode::sticky;
  std::string session_key;  // sent as x-session-id, except in no_session_key mode
  // The replicas by the names they answer as (x-kvgate-worker or
  // x-kvgate-sim-replica): their KV usage is read before each turn, and
  // the cold second turn goes straight to one of them.
  std::vector<std::pair<std::string, std::string>> replicas;  // id, base URL
};
Result<TrajectoryRun, std::string> run_trajectory(const Session& session, const TrajectoryOptions& options);

// POST /reset_prefix_cache on each replica (vLLM's and kvgate-sim's
// endpoint), so that runs compared side by side start from cold caches.
// Returns what failed, or nothing.
std::optional<std::string> reset_prefix_caches(const std::vector<std::string>& replicas);

// GET /metrics on each replica: the simulator's load counters (dial.hpp).
Result<std::vector<ReplicaMetrics>, std::string> scrape_replicas(const std::vector<std::string>& replicas);

}  // namespace kvgate::load
