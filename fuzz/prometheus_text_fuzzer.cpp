// Arbitrary bytes as an engine's /metrics answer and as llama-server's
// /props: the parsers return samples and a count of malformed lines, or
// the props or an error; they never crash, and what they extract is always
// within its documented ranges.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "kvgate/workers/engine_identity.hpp"
#include "kvgate/workers/engine_prefill_level.hpp"
#include "kvgate/workers/prometheus_text.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  auto parsed = kvgate::workers::parse_prometheus_text(std::string_view(reinterpret_cast<const char*>(data), size));
  auto load = kvgate::workers::extract_engine_load(parsed);
  if (load.kv_usage && (*load.kv_usage < 0 || *load.kv_usage > 1)) {
    __builtin_trap();
  }
  if (load.block_size && *load.block_size == 0) {
    __builtin_trap();
  }
  (void)kvgate::workers::engine_kind_from_metrics(parsed);
  if (load.prefill_seconds && load.computed_prompt_tokens) {
    kvgate::workers::EnginePrefillLevel level;
    level.observe(*load.prefill_seconds, *load.computed_prompt_tokens);
    level.observe(*load.prefill_seconds * 2, *load.computed_prompt_tokens * 2);
    if (auto price = level.ms_per_token(); price && !(*price > 0)) {
      __builtin_trap();
    }
  }
  auto props = kvgate::workers::parse_llamacpp_props(std::string_view(reinterpret_cast<const char*>(data), size));
  if (props && (props->total_slots == 0 || props->total_slots > 4096 || props->build.size() > 64)) {
    __builtin_trap();
  }
  return 0;
}
