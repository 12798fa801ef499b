#pragma once
// One recorded trajectory (an agent's or a chat's session) told turn by
// turn, as the seed's practical test logs it: for each turn the worker,
// input tokens, predicted and engine-reported matched prefix tokens,
// prefill time (TTFT), decode time and the worker's KV usage when it was
// chosen. kvgate-bench trajectory replays it through each target three
// ways, from reset caches:
//   sticky            with its session key (the target may keep it together)
//   no_session_key    without one (routing by prompt alone, or round robin)
//   cold_second_turn  with its key, but the second turn sent straight to a
//                     replica that never saw the first
// and reports what the cold turn cost. Pure: the shell (main.cpp) runs the
// turns and fills the rows.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "kvgate/core/result.hpp"
#include "workload.hpp"

namespace kvgate::load {

enum class TrajectoryMode : std::uint8_t { sticky, no_session_key, cold_second_turn };
inline constexpr TrajectoryMode kTrajectoryModes[] = {TrajectoryMode::sticky, TrajectoryMode::no_session_key,
                                                      TrajectoryMode::cold_second_turn};
std::string_view to_string(TrajectoryMode mode);

struct TrajectoryTurn {
  std::uint32_t number = 0;                              // 1-based
  std::string worker;                                    // who served it (x-kvgate-worker, or the replica's own name)
  bool direct = false;                                   // sent straight to a replica, not through the target
  std::string error;                                     // empty: answered
  std::uint32_t input_tokens = 0;                        // the engine's usage.prompt_tokens
  std::uint32_t cached_tokens = 0;                       // the engine's usage ... cached_tokens
  std::optional<std::uint32_t> predicted_cached_tokens;  // kvgate's receipt
  double ttft_ms = -1;
  double decode_ms = -1;
  std::optional<double> kv_usage;  // the worker's, 0..1, just before the turn
};

struct TrajectoryRun {
  std::string target;
  TrajectoryMode mode = TrajectoryMode::sticky;
  std::vector<TrajectoryTurn> turns;
  std::string note;  // why a mode did not run, or ran differently
};

// The trajectory to replay: a GET /debug/sessions/<key> export, else the
// session `session_id` (empty: the first) of session JSON lines or WEKA's
// recorded sessions. Malformed input is reported by line (or by turn).
Result<Session, std::string> parse_trajectory(std::string_view text, std::string_view session_id,
                                              const WorkloadOptions& options);

// The KV-cache usage (0..1) in an engine's /metrics text: vLLM's
// kv_cache_usage_perc (or gpu_cache_usage_perc), SGLang's token_usage,
// llama.cpp's kv_cache_usage_ratio; the largest when several.
std::optional<double> kv_usage_from_metrics(std::string_view text);

// A number in an x-kvgate-route receipt ("predicted_cached",
// "full_attention_cached").
std::optional<std::uint32_t> receipt_number(std::string_view receipt, std::string_view field);
inline std::optional<std::uint32_t> receipt_predicted_cached(std::string_view receipt) {
  return receipt_number(receipt, "predicted_cached");
}

// The replica to send the cold second turn to: the first of `replicas`
// (ids) that is not `first_worker`; nullopt when there is none.
std::optional<std::size_t> cold_replica(const std::vector<std::string>& replicas, std::string_view first_worker);

// The runs with their per-turn rows and, per run, the hit rate across
// turns after the first (cached over prompt tokens), the mean TTFT, the
// prefill tokens computed; per target, the cold second turn's cost (its
// TTFT and prefill tokens against the sticky run's second turn).
nlohmann::json trajectory_json(const std::string& session_id, const std::vector<TrajectoryRun>& runs,
                               const nlohmann::json& meta);

}  // namespace kvgate::load
