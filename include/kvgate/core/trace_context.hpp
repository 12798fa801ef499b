#pragma once
// W3C Trace Context (https://www.w3.org/TR/trace-context/): the ids of a
// `traceparent` header, so the access and decision logs can name the trace
// a request belongs to. kvgate does not create spans: the header (and
// `tracestate`) go to the worker unchanged, and engines that trace (vLLM
// with OpenTelemetry) continue the client's trace.
#include <array>
#include <optional>
#include <string_view>

namespace kvgate {

struct TraceContext {
  std::array<char, 32> trace_id{};  // lower-case hex
  std::array<char, 16> parent_id{};
  bool sampled = false;

  [[nodiscard]] std::string_view trace_id_view() const { return {trace_id.data(), trace_id.size()}; }
};

// The header as the spec's parsing rules read it: version 00 is exactly
// `00-<32 hex>-<16 hex>-<2 hex>`; a later version may append `-...` after
// those 55 characters; version ff, upper-case hex and all-zero ids are
// invalid. Nothing for anything else.
std::optional<TraceContext> parse_traceparent(std::string_view header);

}  // namespace kvgate
