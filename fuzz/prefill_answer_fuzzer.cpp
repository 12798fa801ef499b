// Arbitrary bytes as a prefill worker's answer (vLLM's disaggregated
// protocol), and as the client body the phases rewrite: nothing crashes,
// counts are never invented, and what is handed to the decoder is a JSON
// object whenever the answer carried one.
#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string_view>

#include "kvgate/openai/disaggregation.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  if (auto answer = kvgate::openai::read_prefill_answer(bytes)) {
    if (!answer->kv_transfer_params.empty()) {
      const auto params = nlohmann::json::parse(answer->kv_transfer_params, nullptr, false);
      if (!params.is_object()) {
        __builtin_trap();
      }
      const auto decode =
          nlohmann::json::parse(kvgate::openai::vllm_decode_body("{}", answer->kv_transfer_params), nullptr, false);
      if (!decode.is_object() || !decode.contains("kv_transfer_params")) {
        __builtin_trap();
      }
    }
  }
  // The rewrites accept any body (the gateway only passes bodies it parsed).
  const auto prefill = nlohmann::json::parse(kvgate::openai::vllm_prefill_body(bytes), nullptr, false);
  if (!prefill.is_object() || prefill.value("max_tokens", 0) != 1 || prefill.value("stream", true)) {
    __builtin_trap();
  }
  (void)kvgate::openai::sglang_pd_body(bytes, "10.0.0.1", 8998, 42);
  return 0;
}
