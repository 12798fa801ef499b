#pragma once
// UTF-8 helpers shared by the tokenizer, the chat templates and the request
// shell. Invalid input
// never reaches them unchecked: callers validate once with is_valid_utf8.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace kvgate {

// Strict RFC 3629: no overlongs, no surrogates, nothing above U+10FFFF.
bool is_valid_utf8(std::string_view text);

// Length in bytes of the sequence starting with `lead` (1 for a stray byte).
inline std::size_t utf8_sequence_length(unsigned char lead) {
  if (lead < 0x80) {
    return 1;
  }
  if ((lead & 0xE0) == 0xC0) {
    return 2;
  }
  if ((lead & 0xF0) == 0xE0) {
    return 3;
  }
  if ((lead & 0xF8) == 0xF0) {
    return 4;
  }
  return 1;
}

// Decodes the code point at `position` of valid UTF-8 and advances past it.
char32_t next_code_point(std::string_view text, std::size_t& position);

void append_utf8(std::string& out, char32_t code_point);

// Bytes to text the way WHATWG's TextDecoder does (what the reference
// tokenizer uses): each maximal invalid subsequence becomes U+FFFD.
std::string decode_utf8_lossy(std::string_view bytes);

// JavaScript's String.prototype.trim set (WhiteSpace and LineTerminator):
// the reference tokenizer strips added tokens' neighbours with it.
bool is_javascript_whitespace(char32_t code_point);
std::string_view trim_start_javascript(std::string_view text);
std::string_view trim_end_javascript(std::string_view text);

}  // namespace kvgate
