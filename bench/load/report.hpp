#pragma once
// What a run measured, and the reports written from it. Pure: records in,
// JSON / Markdown / HTML text out.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace kvgate::load {

struct RequestRecord {
  std::size_t session = 0;  // index in the workload (traces: the request's index)
  std::uint32_t turn = 0;   // 0-based; traces: 0
  int status = 0;           // HTTP status; 0: no answer (connection failed)
  std::string error;        // empty when the request succeeded
  std::string worker;       // x-kvgate-worker, when the target is kvgate
  std::uint32_t prompt_tokens = 0;
  std::uint32_t cached_tokens = 0;  // usage.prompt_tokens_details.cached_tokens
  std::uint32_t output_tokens = 0;
  double ttft_ms = -1;  // to the first streamed event; < 0: none
  double latency_ms = 0;
  double sent_ms = 0;                // when it was sent, from the run's start
  std::uint32_t ceiling_tokens = 0;  // the reuse ceiling's share of prompt_tokens (dial.hpp)
  // A sub-agent's request (workload.hpp, Turn::subagents): its number in
  // its fork (1-based; 0: the session's own request), and how many
  // sub-agents the fork ran at once.
  std::uint32_t subagent = 0;
  std::uint32_t fork_size = 0;
  // kvgate's route receipt: the cached tokens it predicted, and on a
  // hybrid-attention model what its full-attention group alone gave.
  std::optional<std::uint32_t> predicted_cached;
  std::optional<std::uint32_t> full_attention_cached;
  // A disaggregated model's request whose prompt a prefill worker computed
  // (the receipt's prefill=remote_prefill): the decoder's usage counts the
  // moved KV as cached.
  bool remote_prefill = false;
};

struct RunInfo {
  std::string name;
  std::string target;
  std::string workload;
  double wall_seconds = 0;
};

// Totals, the prefix-cache hit rate (cached / prompt tokens) overall, by
// turn and per session after its first turn, against the reuse ceiling,
// the prefill tokens computed (prompt - cached: the GPU work spent),
// latency percentiles and the TTFT distribution's curve, and how evenly
// the workers were used, overall and over time.
nlohmann::json summarize(const RunInfo& run, const std::vector<RequestRecord>& records);

// One or more run summaries side by side. `meta` (optional): "fleet" (a
// description), "workload_ceiling", "baselines" (run names the others are
// compared with; default: the first run).
std::string markdown_report(const std::vector<nlohmann::json>& runs, const nlohmann::json& meta = {});
std::string html_report(const std::vector<nlohmann::json>& runs, const nlohmann::json& meta = {});

// A member of a JSON object or, when absent (or not an object), null, which
// iterates as empty: a reference, never a temporary to iterate over.
const nlohmann::json& member(const nlohmann::json& object, const char* key);

// One trajectory turn by turn (kvgate-bench trajectory's trajectory.json,
// trajectory.hpp): per target a summary of the three modes, the cold
// second turn's cost, then each mode's per-turn table; the HTML page draws
// a chart per target (TTFT and hit rate by turn, one line per mode).
std::string trajectory_markdown(const nlohmann::json& trajectory);
std::string trajectory_html(const nlohmann::json& trajectory);

// Capacity at an SLO (kvgate-bench capacity's capacity.json): per target the
// highest load that held, its rate, and every step.
std::string capacity_markdown(const nlohmann::json& capacity);
std::string capacity_html(const nlohmann::json& capacity);

}  // namespace kvgate::load
