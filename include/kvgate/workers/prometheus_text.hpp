#pragma once
// Parsing of engines' Prometheus text exposition (GET /metrics) and the
// extraction of the load signals routing needs, for vLLM, SGLang and
// llama.cpp names (../shared/docs/engines.md section 2). Pure and total:
// malformed lines are skipped and counted, never fatal.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace kvgate::workers {

struct MetricSample {
  std::string name;
  std::vector<std::pair<std::string, std::string>> labels;
  double value = 0;

  [[nodiscard]] std::optional<std::string_view> label(std::string_view key) const;
};

struct ParsedMetrics {
  std::vector<MetricSample> samples;
  std::uint32_t malformed_lines = 0;
};

ParsedMetrics parse_prometheus_text(std::string_view text);

// What an engine's metrics say about its load. Absent fields: the engine did
// not export that signal. With several engine processes behind one endpoint
// (label engine="0", "1", ...), counts add up and KV usage is the highest.
struct EngineLoad {
  std::optional<double> running;
  std::optional<double> waiting;
  std::optional<double> kv_usage;  // 0..1
  std::optional<double> prefix_queries_tokens;
  std::optional<double> prefix_hit_tokens;
  std::optional<std::uint32_t> block_size;
  std::optional<std::uint64_t> num_gpu_blocks;
  // The engine's own prefill clock (counters since it started): seconds
  // spent computing prompts and the prompt tokens computed (not served from
  // its cache). llama.cpp: prompt_seconds_total, prompt_tokens_total. vLLM:
  // request_prefill_time_seconds_sum, prompt_tokens_total less
  // prefix_cache_hits_total. Absent: the engine exports no such pair.
  std::optional<double> prefill_seconds;
  std::optional<double> computed_prompt_tokens;
  // The engine's own prompt-token counter as exported (vllm:
  // prompt_tokens_total, llamacpp:prompt_tokens_total): monotonic while the
  // engine runs, unlike computed_prompt_tokens, which vLLM's two counters
  // give as a difference of counters updated at different moments.
  std::optional<double> prompt_tokens_counter;
  // vllm:lora_requests_info (its newest sample, the largest value: a
  // timestamp): the adapters with requests running and waiting, and how
  // many the engine holds at once (--max-loras).
  struct Adapters {
    std::vector<std::string> running;
    std::vector<std::string> waiting;
    std::uint32_t max_loras = 0;
  };
  std::optional<Adapters> adapters;
};

EngineLoad extract_engine_load(const ParsedMetrics& metrics);

}  // namespace kvgate::workers
