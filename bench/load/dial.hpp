#pragma once
// The load dial and what a workload allows. Pure: workloads and numbers
// in, rates and ceilings out, deterministic for a seed.
// - Load is round robin's prefill utilisation (../shared/docs/
//   routing-study.md): the share of the fleet's prefill capacity that round
//   robin's computed prompt tokens take. Round robin computes every prompt
//   token except the prefix the replica it lands on was sent before: the
//   estimate replays the workload round robin over N caches that never
//   evict, so under KV pressure round robin computes somewhat more than
//   dialled (each run reports the utilisation the replicas measured).
// - The reuse ceiling of a request is its longest prefix, in whole blocks,
//   that an earlier request of the workload sent: what an infinite cache
//   placed perfectly would reuse.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

#include "workload.hpp"

namespace kvgate::load {

// Prompt bytes per token of the approximate tokenisation (kvgate's and the
// simulator's without a tokenizer).
inline constexpr std::uint32_t kBytesPerToken = 4;

// Tracks the prefixes a run has sent. A prompt's text is cut into blocks of
// `block_bytes`; a block is reusable when the chain of blocks up to it
// (its whole prefix) was sent before.
class PrefixCeiling {
 public:
  explicit PrefixCeiling(std::uint32_t block_bytes) : block_bytes_(block_bytes == 0 ? 1 : block_bytes) {}
  // The reusable share of `text` (0..1, by bytes, whole blocks only), then
  // remembers its blocks.
  double observe(std::string_view text);

 private:
  std::uint32_t block_bytes_;
  std::unordered_set<std::uint64_t> seen_;
};

// The text a chat prompt is cut into blocks from: each message's role and
// content in order. Not the engine's template, but two prompts share a
// prefix of it exactly when they share a prefix of messages.
std::string chat_prefix_text(const std::vector<std::pair<std::string, std::string>>& messages);

// The prompt tokens a workload offers, before any run: chat answers are
// taken as `max_tokens` tokens of text unique to their turn (the simulator
// answers exactly that many).
struct OfferedTokens {
  double prompt = 0;       // every request's prompt
  double ceiling = 0;      // the reusable part (see above)
  double round_robin = 0;  // what round robin computes: prompt - ceiling / replicas
  std::size_t requests = 0;
  double trace_span_ms = 0;  // traces: first to last arrival, unscaled
};
OfferedTokens offered_tokens(const Workload& workload, std::uint32_t replicas, std::uint32_t block_tokens);

// Session workloads: sessions per second that make round robin's prefill
// take `load` of the fleet's capacity (tokens per real second, all
// replicas together). 0 when the workload offers nothing.
double session_rate_for_load(const OfferedTokens& offered, std::size_t sessions, double load,
                             double fleet_prefill_tokens_per_s);
// Traces: the factor arrival times are divided by for the same load.
double trace_speedup_for_load(const OfferedTokens& offered, double load, double fleet_prefill_tokens_per_s);

// Start times (ms from the run's start) of `count` sessions arriving as a
// Poisson process of `rate_per_s`; the first starts at 0.
std::vector<double> poisson_starts_ms(std::size_t count, double rate_per_s, std::uint64_t seed);

// What a replica's /metrics says about its capacity and the work it did
// (kvgate-sim's kvgate_sim_* series; vLLM's own for prompt tokens). A
// series the replica does not export stays absent.
struct ReplicaMetrics {
  std::optional<double> prefill_tokens_per_s;  // when busy, real seconds
  std::optional<double> busy_seconds;          // counter
  std::optional<double> prefill_seconds;       // counter
  std::optional<double> num_gpu_blocks;
  std::optional<double> prompt_tokens;           // vllm:prompt_tokens_total
  std::optional<double> lora_loads;              // kvgate_sim_lora_loads_total
  std::optional<double> computed_prompt_tokens;  // kvgate_sim_computed_prompt_tokens_total
  std::optional<double> kv_transfers;            // kvgate_sim_kv_transfers_total (a decoder's)
  std::optional<double> kv_transfer_seconds;     // kvgate_sim_kv_transfer_seconds_total (model seconds)
  std::optional<double> prefix_hit_tokens;       // kvgate_sim_prefix_hit_tokens_total (its own cache's hits)
};
ReplicaMetrics parse_replica_metrics(std::string_view exposition);

// What the replicas did during a run, from their counters before and after.
struct FleetLoad {
  double prefill_utilisation = 0;  // prefill seconds / (replicas x wall seconds)
  double busy_fraction = 0;        // busy seconds / (replicas x wall seconds)
  bool measured = false;           // every replica exported both counters
};
FleetLoad fleet_load(const std::vector<ReplicaMetrics>& before, const std::vector<ReplicaMetrics>& after,
                     double wall_seconds);

}  // namespace kvgate::load
