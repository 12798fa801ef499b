#pragma once
// Drives a workload against one target and records every request.
// - Sessions run closed loop: `concurrency` sessions at a time, each on its
//   own keep-alive connection, turn after turn; a turn's history holds the
//   answers the target actually gave, as a real chat client's would.
// - Traces run open loop: each request leaves at its arrival time (scaled),
//   whatever is still in flight, on an idle connection or a new one.
// One io_context on the calling thread; nothing is shared across threads.
#include <optional>
#include <string>
#include <vector>

#include "report.hpp"
#include "workload.hpp"

namespace kvgate::load {

struct RunOptions {
  std::string target;  // base URL, e.g. http://127.0.0.1:8080
  std::string model;   // empty: the target's first model from GET /v1/models
  std::uint32_t concurrency = 8;
  double duration_seconds = 0;  // stop starting requests after this long (0: run the whole workload)
};

struct RunResult {
  std::string model;
  std::vector<RequestRecord> records;
  double wall_seconds = 0;
};

Result<RunResult, std::string> run_workload(const Workload& workload, const RunOptions& options);

// POST /reset_prefix_cache on each replica (vLLM's and kvgate-sim's
// endpoint), so that runs compared side by side start from cold caches.
// Returns what failed, or nothing.
std::optional<std::string> reset_prefix_caches(const std::vector<std::string>& replicas);

}  // namespace kvgate::load
