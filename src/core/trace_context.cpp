#include "kvgate/core/trace_context.hpp"

#include <algorithm>

namespace kvgate {
namespace {

bool lower_hex(std::string_view text) {
  return std::all_of(text.begin(), text.end(), [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

bool all_zero(std::string_view text) {
  return std::all_of(text.begin(), text.end(), [](char c) { return c == '0'; });
}

}  // namespace

std::optional<TraceContext> parse_traceparent(std::string_view header) {
  constexpr std::size_t kVersion00Size = 55;  // 2 + 1 + 32 + 1 + 16 + 1 + 2
  if (header.size() < kVersion00Size || header[2] != '-' || header[35] != '-' || header[52] != '-') {
    return std::nullopt;
  }
  const auto version = header.substr(0, 2);
  const auto trace_id = header.substr(3, 32);
  const auto parent_id = header.substr(36, 16);
  const auto flags = header.substr(53, 2);
  if (!lower_hex(version) || version == "ff" || !lower_hex(trace_id) || !lower_hex(parent_id) || !lower_hex(flags) ||
      all_zero(trace_id) || all_zero(parent_id)) {
    return std::nullopt;
  }
  // Version 00 has nothing after the flags; a later version may add fields.
  if (header.size() > kVersion00Size && (version == "00" || header[kVersion00Size] != '-')) {
    return std::nullopt;
  }
  TraceContext context;
  std::copy(trace_id.begin(), trace_id.end(), context.trace_id.begin());
  std::copy(parent_id.begin(), parent_id.end(), context.parent_id.begin());
  const int flag_bits = (flags[1] >= 'a' ? flags[1] - 'a' + 10 : flags[1] - '0');
  context.sampled = (flag_bits & 1) != 0;
  return context;
}

}  // namespace kvgate
