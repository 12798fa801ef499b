// Arbitrary bytes as a request body: inspection returns a summary or an
// OpenAI error, never crashes, and an error is always a 4xx with a body.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "kvgate/core/trace_context.hpp"
#include "kvgate/openai/request.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view body(reinterpret_cast<const char*>(data), size);
  // The same bytes as a traceparent header: a valid one has exactly hex ids.
  if (auto trace = kvgate::parse_traceparent(body)) {
    for (char c : trace->trace_id) {
      if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) {
        __builtin_trap();
      }
    }
  }
  for (auto endpoint : {kvgate::openai::Endpoint::chat_completions, kvgate::openai::Endpoint::completions}) {
    auto result = kvgate::openai::inspect_request(body, endpoint, size % 2 == 0 ? "" : "session");
    if (!result) {
      const auto& error = result.error();
      if (error.status < 400 || error.status >= 500 || error.message.empty()) {
        __builtin_trap();
      }
      (void)kvgate::openai::error_body(error);
    }
  }
  return 0;
}
