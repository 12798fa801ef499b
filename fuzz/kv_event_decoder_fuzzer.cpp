// Arbitrary bytes as a KV-event payload: the decoder returns a batch or an
// error value; it never crashes, throws or hangs, and every stored event it
// accepts has exactly one block of tokens per hash.
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <variant>

#include "kvgate/kv_events/decoder.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  auto batch = kvgate::kv_events::decode_batch(std::string_view(reinterpret_cast<const char*>(data), size));
  if (!batch) {
    return 0;
  }
  for (const auto& event : batch->events) {
    if (const auto* stored = std::get_if<kvgate::kv_events::BlockStored>(&event)) {
      if (stored->block_size == 0 || stored->token_ids.size() != stored->block_hashes.size() * stored->block_size) {
        __builtin_trap();
      }
    }
  }
  return 0;
}
