#pragma once
// Parsing of the human-written quantities used in configuration files:
// durations ("250ms", "5s", "2m", "1h") and byte sizes ("64KiB", "16MiB"),
// and of plain whole numbers.
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace kvgate {

using Milliseconds = std::chrono::milliseconds;

// Decimal digits only (no sign, no space, no unit), within 64 bits: counts
// and numbers read from command lines and kernel files.
std::optional<std::uint64_t> parse_whole_number(std::string_view text);

// Accepts a non-negative integer followed by one of ms, s, m, h. No unit, a
// fraction or a sign is rejected: config durations must say what they mean.
std::optional<Milliseconds> parse_duration(std::string_view text);

// Accepts a plain integer (bytes) or an integer followed by B, KiB, MiB, GiB
// (powers of 1024) or KB, MB, GB (powers of 1000).
std::optional<std::uint64_t> parse_byte_size(std::string_view text);

// "1500ms" style rendering, inverse of parse_duration for whole units.
std::string format_duration(Milliseconds duration);

}  // namespace kvgate
