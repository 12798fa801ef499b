#include "kvgate/core/units.hpp"

#include <array>
#include <charconv>
#include <limits>
#include <utility>

namespace kvgate {
namespace {

struct SplitNumber {
  std::uint64_t value = 0;
  std::string_view unit;
};

std::optional<SplitNumber> split_number(std::string_view text) {
  std::size_t digits = 0;
  while (digits < text.size() && text[digits] >= '0' && text[digits] <= '9') {
    ++digits;
  }
  if (digits == 0) {
    return std::nullopt;
  }
  SplitNumber result;
  auto [end, error] = std::from_chars(text.data(), text.data() + digits, result.value);
  if (error != std::errc{} || end != text.data() + digits) {
    return std::nullopt;
  }
  result.unit = text.substr(digits);
  return result;
}

std::optional<std::uint64_t> checked_multiply(std::uint64_t value, std::uint64_t factor) {
  if (factor != 0 && value > std::numeric_limits<std::uint64_t>::max() / factor) {
    return std::nullopt;
  }
  return value * factor;
}

}  // namespace

std::optional<std::uint64_t> parse_whole_number(std::string_view text) {
  auto number = split_number(text);
  if (!number || !number->unit.empty()) {
    return std::nullopt;
  }
  return number->value;
}

std::optional<Milliseconds> parse_duration(std::string_view text) {
  auto number = split_number(text);
  if (!number) {
    return std::nullopt;
  }
  static constexpr std::array<std::pair<std::string_view, std::uint64_t>, 4> kUnits{
      {{"ms", 1}, {"s", 1000}, {"m", 60'000}, {"h", 3'600'000}}};
  for (const auto& [unit, factor] : kUnits) {
    if (number->unit != unit) {
      continue;
    }
    auto milliseconds = checked_multiply(number->value, factor);
    // Keep durations well inside what steady_clock arithmetic can add to now().
    if (!milliseconds || *milliseconds > std::uint64_t{1} << 40) {
      return std::nullopt;
    }
    return Milliseconds(static_cast<Milliseconds::rep>(*milliseconds));
  }
  return std::nullopt;
}

std::optional<std::uint64_t> parse_byte_size(std::string_view text) {
  auto number = split_number(text);
  if (!number) {
    return std::nullopt;
  }
  static constexpr std::array<std::pair<std::string_view, std::uint64_t>, 8> kUnits{{
      {"", 1},
      {"B", 1},
      {"KiB", 1024},
      {"MiB", 1024 * 1024},
      {"GiB", 1024 * 1024 * 1024},
      {"KB", 1000},
      {"MB", 1000 * 1000},
      {"GB", 1000 * 1000 * 1000},
  }};
  for (const auto& [unit, factor] : kUnits) {
    if (number->unit == unit) {
      return checked_multiply(number->value, factor);
    }
  }
  return std::nullopt;
}

std::string format_duration(Milliseconds duration) {
  auto count = duration.count();
  if (count != 0 && count % 3'600'000 == 0) {
    return std::to_string(count / 3'600'000) + "h";
  }
  if (count != 0 && count % 60'000 == 0) {
    return std::to_string(count / 60'000) + "m";
  }
  if (count != 0 && count % 1000 == 0) {
    return std::to_string(count / 1000) + "s";
  }
  return std::to_string(count) + "ms";
}

}  // namespace kvgate
