#include "kvgate/workers/prometheus_text.hpp"

#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <limits>

namespace kvgate::workers {
namespace {

bool is_name_char(char character, bool first) {
  return (character >= 'a' && character <= 'z') || (character >= 'A' && character <= 'Z') || character == '_' ||
         character == ':' || (!first && character >= '0' && character <= '9');
}

std::optional<double> parse_value(std::string_view text) {
  if (text == "NaN") {
    return std::numeric_limits<double>::quiet_NaN();
  }
  if (text == "+Inf" || text == "Inf") {
    return std::numeric_limits<double>::infinity();
  }
  if (text == "-Inf") {
    return -std::numeric_limits<double>::infinity();
  }
  double value = 0;
  auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc{} || end != text.data() + text.size()) {
    return std::nullopt;
  }
  return value;
}

// Label value with the exposition format's escapes (\\, \", \n); `at` is
// just past the opening quote and ends just past the closing one.
std::optional<std::string> parse_label_value(std::string_view line, std::size_t& at) {
  std::string value;
  while (at < line.size()) {
    char character = line[at++];
    if (character == '"') {
      return value;
    }
    if (character == '\\') {
      if (at >= line.size()) {
        return std::nullopt;
      }
      char escaped = line[at++];
      value.push_back(escaped == 'n' ? '\n' : escaped);
    } else {
      value.push_back(character);
    }
  }
  return std::nullopt;
}

bool parse_labels(std::string_view line, std::size_t& at, MetricSample& sample) {
  ++at;  // '{'
  while (at < line.size() && line[at] != '}') {
    auto start = at;
    while (at < line.size() && is_name_char(line[at], at == start)) {
      ++at;
    }
    if (at == start || at + 1 >= line.size() || line[at] != '=' || line[at + 1] != '"') {
      return false;
    }
    std::string key(line.substr(start, at - start));
    at += 2;
    auto value = parse_label_value(line, at);
    if (!value) {
      return false;
    }
    sample.labels.emplace_back(std::move(key), std::move(*value));
    if (at < line.size() && line[at] == ',') {
      ++at;
    }
  }
  if (at >= line.size()) {
    return false;
  }
  ++at;  // '}'
  return true;
}

std::optional<MetricSample> parse_sample(std::string_view line) {
  MetricSample sample;
  std::size_t at = 0;
  while (at < line.size() && is_name_char(line[at], at == 0)) {
    ++at;
  }
  if (at == 0) {
    return std::nullopt;
  }
  sample.name = std::string(line.substr(0, at));
  if (at < line.size() && line[at] == '{' && !parse_labels(line, at, sample)) {
    return std::nullopt;
  }
  auto rest = line.substr(at);
  auto value_start = rest.find_first_not_of(" \t");
  if (value_start == std::string_view::npos) {
    return std::nullopt;
  }
  rest = rest.substr(value_start);
  auto value_end = rest.find_first_of(" \t");  // an optional timestamp may follow
  auto value = parse_value(rest.substr(0, value_end));
  if (!value) {
    return std::nullopt;
  }
  sample.value = *value;
  return sample;
}

void add(std::optional<double>& total, double value) {
  total = total.value_or(0) + value;
}

}  // namespace

std::optional<std::string_view> MetricSample::label(std::string_view key) const {
  for (const auto& [name, value] : labels) {
    if (name == key) {
      return value;
    }
  }
  return std::nullopt;
}

ParsedMetrics parse_prometheus_text(std::string_view text) {
  ParsedMetrics parsed;
  while (!text.empty()) {
    auto end = text.find('\n');
    auto line = text.substr(0, end);
    text = end == std::string_view::npos ? std::string_view{} : text.substr(end + 1);
    if (!line.empty() && line.back() == '\r') {
      line.remove_suffix(1);
    }
    auto first = line.find_first_not_of(" \t");
    if (first == std::string_view::npos || line[first] == '#') {
      continue;
    }
    if (auto sample = parse_sample(line.substr(first))) {
      parsed.samples.push_back(std::move(*sample));
    } else {
      ++parsed.malformed_lines;
    }
  }
  return parsed;
}

// A comma-separated label value as names (empty entries dropped).
std::vector<std::string> label_list(std::optional<std::string_view> text) {
  std::vector<std::string> names;
  if (!text) {
    return names;
  }
  std::string_view rest = *text;
  while (!rest.empty()) {
    const auto comma = rest.find(',');
    auto name = rest.substr(0, comma);
    if (!name.empty()) {
      names.emplace_back(name);
    }
    rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
  }
  return names;
}

EngineLoad extract_engine_load(const ParsedMetrics& metrics) {
  EngineLoad load;
  double adapters_at = -1;  // the newest vllm:lora_requests_info sample's value (a timestamp)
  std::optional<double> vllm_prefill_seconds;
  std::optional<double> vllm_prompt_tokens;
  std::optional<double> llamacpp_prompt_seconds;
  std::optional<double> llamacpp_prompt_tokens;
  for (const auto& sample : metrics.samples) {
    const auto& name = sample.name;
    if (!std::isfinite(sample.value)) {
      continue;
    }
    if (name == "vllm:num_requests_running" || name == "sglang:num_running_reqs" ||
        name == "llamacpp:requests_processing") {
      add(load.running, sample.value);
    } else if (name == "vllm:num_requests_waiting" || name == "sglang:num_queue_reqs" ||
               name == "llamacpp:requests_deferred") {
      add(load.waiting, sample.value);
    } else if (name == "vllm:kv_cache_usage_perc" || name == "vllm:gpu_cache_usage_perc" ||
               name == "sglang:token_usage" || name == "llamacpp:kv_cache_usage_ratio") {
      load.kv_usage = std::max(load.kv_usage.value_or(0), std::clamp(sample.value, 0.0, 1.0));
    } else if (name == "vllm:request_prefill_time_seconds_sum") {
      add(vllm_prefill_seconds, sample.value);
    } else if (name == "vllm:prompt_tokens_total") {
      add(vllm_prompt_tokens, sample.value);
    } else if (name == "llamacpp:prompt_seconds_total") {
      add(llamacpp_prompt_seconds, sample.value);
    } else if (name == "llamacpp:prompt_tokens_total") {
      add(llamacpp_prompt_tokens, sample.value);
    } else if (name == "vllm:prefix_cache_queries_total" || name == "vllm:prefix_cache_queries") {
      // llm-d-inference-sim names vLLM's counters without the _total suffix.
      add(load.prefix_queries_tokens, sample.value);
    } else if (name == "vllm:prefix_cache_hits_total" || name == "vllm:prefix_cache_hits" ||
               name == "sglang:cached_tokens_total" || name == "llamacpp:prompt_tokens_cached_total") {
      add(load.prefix_hit_tokens, sample.value);
    } else if (name == "vllm:lora_requests_info") {
      if (sample.value < adapters_at) {
        continue;
      }
      adapters_at = sample.value;
      EngineLoad::Adapters adapters;
      adapters.running = label_list(sample.label("running_lora_adapters"));
      adapters.waiting = label_list(sample.label("waiting_lora_adapters"));
      std::uint32_t max_loras = 0;
      if (auto text = sample.label("max_lora");
          text && std::from_chars(text->data(), text->data() + text->size(), max_loras).ec == std::errc{}) {
        adapters.max_loras = max_loras;
      }
      load.adapters = std::move(adapters);
    } else if (name == "vllm:cache_config_info") {
      std::uint64_t number = 0;
      auto block_size = sample.label("block_size");
      if (block_size &&
          std::from_chars(block_size->data(), block_size->data() + block_size->size(), number).ec == std::errc{} &&
          number > 0 && number <= 1u << 20) {
        load.block_size = static_cast<std::uint32_t>(number);
      }
      auto blocks = sample.label("num_gpu_blocks");
      if (blocks && std::from_chars(blocks->data(), blocks->data() + blocks->size(), number).ec == std::errc{}) {
        load.num_gpu_blocks = number;
      }
    }
  }
  load.prompt_tokens_counter = llamacpp_prompt_tokens ? llamacpp_prompt_tokens : vllm_prompt_tokens;
  if (llamacpp_prompt_seconds && llamacpp_prompt_tokens) {
    load.prefill_seconds = llamacpp_prompt_seconds;
    load.computed_prompt_tokens = llamacpp_prompt_tokens;  // llama.cpp counts only the tokens it computed
  } else if (vllm_prefill_seconds && vllm_prompt_tokens) {
    load.prefill_seconds = vllm_prefill_seconds;
    load.computed_prompt_tokens = std::max(0.0, *vllm_prompt_tokens - load.prefix_hit_tokens.value_or(0));
  }
  return load;
}

}  // namespace kvgate::workers
