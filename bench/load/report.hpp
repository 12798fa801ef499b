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
};

struct RunInfo {
  std::string name;
  std::string target;
  std::string workload;
  double wall_seconds = 0;
};

// Totals, the prefix-cache hit rate (cached / prompt tokens) overall, by
// turn and per session after its first turn, latency percentiles and how
// evenly the workers were used.
nlohmann::json summarize(const RunInfo& run, const std::vector<RequestRecord>& records);

// One or more run summaries side by side; the first run is the baseline
// the others' ratios refer to.
std::string markdown_report(const std::vector<nlohmann::json>& runs);
std::string html_report(const std::vector<nlohmann::json>& runs);

}  // namespace kvgate::load
