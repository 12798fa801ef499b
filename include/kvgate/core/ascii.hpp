#pragma once
// ASCII case rules of HTTP: header names and media types compare without
// case (RFC 9110), and nothing outside ASCII is folded.
#include <algorithm>
#include <string>
#include <string_view>

namespace kvgate {

constexpr char ascii_lower(char c) {
  return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c;
}

constexpr bool equal_ignoring_ascii_case(std::string_view a, std::string_view b) {
  return a.size() == b.size() &&
         std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) { return ascii_lower(x) == ascii_lower(y); });
}

// A Content-Type value's media type: before any parameter, trailing
// blanks dropped, lower case ("Text/Event-Stream; charset=utf-8" ->
// "text/event-stream").
inline std::string media_type_of(std::string_view content_type) {
  auto type = content_type.substr(0, content_type.find(';'));
  while (!type.empty() && (type.back() == ' ' || type.back() == '\t')) {
    type.remove_suffix(1);
  }
  std::string lower(type);
  std::transform(lower.begin(), lower.end(), lower.begin(), ascii_lower);
  return lower;
}

}  // namespace kvgate
