// Arbitrary bytes as an engine's /metrics answer: the parser returns samples
// and a count of malformed lines; it never crashes, and the extracted load
// is always within its documented ranges.
#include <cstddef>
#include <cstdint>
#include <string_view>

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
  return 0;
}
