#include "kvgate/workers/prometheus_text.hpp"

#include <gtest/gtest.h>

#include <cmath>

namespace kvgate::workers {
namespace {

// Shaped like vLLM's exposition (two engine processes behind one server).
const char* kVllm = R"(# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="qwen3"} 3.0
vllm:num_requests_running{engine="1",model_name="qwen3"} 2.0
vllm:num_requests_waiting{engine="0",model_name="qwen3"} 7.0
vllm:num_requests_waiting{engine="1",model_name="qwen3"} 0.0
vllm:kv_cache_usage_perc{engine="0",model_name="qwen3"} 0.25
vllm:kv_cache_usage_perc{engine="1",model_name="qwen3"} 0.5
# TYPE vllm:prefix_cache_queries counter
vllm:prefix_cache_queries_total{engine="0",model_name="qwen3"} 1.0e+04
vllm:prefix_cache_hits_total{engine="0",model_name="qwen3"} 2500.0
vllm:time_to_first_token_seconds_bucket{engine="0",le="0.001",model_name="qwen3"} 0.0
vllm:time_to_first_token_seconds_bucket{engine="0",le="+Inf",model_name="qwen3"} 12.0
vllm:cache_config_info{block_size="16",cache_dtype="auto",enable_prefix_caching="True",engine="0",num_gpu_blocks="27000"} 1.0
)";

const char* kSglang = R"(# HELP sglang:num_running_reqs The number of running requests.
# TYPE sglang:num_running_reqs gauge
sglang:num_running_reqs{model_name="llama",tp_rank="0"} 4.0
sglang:num_queue_reqs{model_name="llama",tp_rank="0"} 1.0
sglang:token_usage{model_name="llama",tp_rank="0"} 0.81
sglang:cached_tokens_total{model_name="llama",tp_rank="0"} 1234.0
)";

TEST(PrometheusText, ParsesNamesLabelsAndValues) {
  auto parsed = parse_prometheus_text(kVllm);
  EXPECT_EQ(parsed.malformed_lines, 0u);
  ASSERT_EQ(parsed.samples.size(), 11u);
  EXPECT_EQ(parsed.samples[0].name, "vllm:num_requests_running");
  EXPECT_EQ(parsed.samples[0].label("engine"), "0");
  EXPECT_DOUBLE_EQ(parsed.samples[6].value, 10000.0);
  EXPECT_DOUBLE_EQ(parsed.samples[9].value, 12.0);
  EXPECT_EQ(parsed.samples[9].label("le"), "+Inf");
}

TEST(PrometheusText, ExtractsVllmLoadAcrossEngines) {
  auto load = extract_engine_load(parse_prometheus_text(kVllm));
  EXPECT_EQ(load.running, 5.0);
  EXPECT_EQ(load.waiting, 7.0);
  EXPECT_EQ(load.kv_usage, 0.5);
  EXPECT_EQ(load.prefix_queries_tokens, 10000.0);
  EXPECT_EQ(load.prefix_hit_tokens, 2500.0);
  EXPECT_EQ(load.block_size, 16u);
  EXPECT_EQ(load.num_gpu_blocks, 27000u);
}

// llm-d-inference-sim's exposition (v0.10.2): vLLM's prefix-cache counters
// without the _total suffix, read as vLLM's.
TEST(PrometheusText, ReadsLlmdSimulatorsPrefixCacheCounters) {
  auto load = extract_engine_load(
      parse_prometheus_text("# TYPE vllm:prefix_cache_hits counter\n"
                            "vllm:prefix_cache_hits{model_name=\"sim-model\"} 32\n"
                            "# TYPE vllm:prefix_cache_queries counter\n"
                            "vllm:prefix_cache_queries{model_name=\"sim-model\"} 94\n"
                            "vllm:cache_config_info{block_size=\"16\",num_gpu_blocks=\"4096\"} 1\n"));
  EXPECT_EQ(load.prefix_hit_tokens, 32.0);
  EXPECT_EQ(load.prefix_queries_tokens, 94.0);
  EXPECT_EQ(load.num_gpu_blocks, 4096u);
}

// vLLM writes one lora_requests_info sample per change, valued at its time:
// the newest says which adapters run and wait now.
TEST(PrometheusText, ExtractsTheNewestLoraReport) {
  auto load = extract_engine_load(parse_prometheus_text(
      "vllm:lora_requests_info{max_lora=\"2\",running_lora_adapters=\"old\",waiting_lora_adapters=\"\"} "
      "1700000000.5\n"
      "vllm:lora_requests_info{max_lora=\"2\",running_lora_adapters=\"sql,support\",waiting_lora_adapters=\"ops\"} "
      "1700000009.0\n"));
  ASSERT_TRUE(load.adapters.has_value());
  EXPECT_EQ(load.adapters->max_loras, 2u);
  EXPECT_EQ(load.adapters->running, (std::vector<std::string>{"sql", "support"}));
  EXPECT_EQ(load.adapters->waiting, (std::vector<std::string>{"ops"}));
  EXPECT_FALSE(extract_engine_load(parse_prometheus_text("vllm:num_requests_running 1\n")).adapters);
}

TEST(PrometheusText, ExtractsSglangLoad) {
  auto load = extract_engine_load(parse_prometheus_text(kSglang));
  EXPECT_EQ(load.running, 4.0);
  EXPECT_EQ(load.waiting, 1.0);
  EXPECT_EQ(load.kv_usage, 0.81);
  EXPECT_EQ(load.prefix_hit_tokens, 1234.0);
  EXPECT_FALSE(load.block_size);
}

TEST(PrometheusText, HandlesEscapesTimestampsSpecialValuesAndCrlf) {
  auto parsed = parse_prometheus_text(
      "a{path=\"C:\\\\dir\",quote=\"say \\\"hi\\\"\",nl=\"x\\ny\"} 1 1700000000000\r\n"
      "b NaN\n"
      "c{} -Inf\n"
      "  # indented comment\n");
  ASSERT_EQ(parsed.samples.size(), 3u);
  EXPECT_EQ(parsed.samples[0].label("path"), "C:\\dir");
  EXPECT_EQ(parsed.samples[0].label("quote"), "say \"hi\"");
  EXPECT_EQ(parsed.samples[0].label("nl"), "x\ny");
  EXPECT_DOUBLE_EQ(parsed.samples[0].value, 1.0);
  EXPECT_TRUE(std::isnan(parsed.samples[1].value));
  EXPECT_TRUE(std::isinf(parsed.samples[2].value));
  EXPECT_EQ(parsed.malformed_lines, 0u);
}

TEST(PrometheusText, MalformedLinesAreCountedAndSkipped) {
  auto parsed = parse_prometheus_text(
      "good 1\n"
      "{no_name=\"x\"} 1\n"
      "unterminated{a=\"b 1\n"
      "no_value\n"
      "bad_value twelve\n"
      "bad_label{a=b} 1\n"
      "9starts_with_digit 1\n"
      "vllm:num_requests_running NaN\n");
  EXPECT_EQ(parsed.samples.size(), 2u);
  EXPECT_EQ(parsed.malformed_lines, 6u);
  // A NaN gauge is no load information.
  EXPECT_FALSE(extract_engine_load(parsed).running);
}

TEST(PrometheusText, HostileCacheConfigLabelsAreIgnored) {
  auto load = extract_engine_load(
      parse_prometheus_text("vllm:cache_config_info{block_size=\"0\",num_gpu_blocks=\"lots\"} 1\n"));
  EXPECT_FALSE(load.block_size);
  EXPECT_FALSE(load.num_gpu_blocks);
}

}  // namespace
}  // namespace kvgate::workers
