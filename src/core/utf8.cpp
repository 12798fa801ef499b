#include "kvgate/core/utf8.hpp"

#include <cstring>

namespace kvgate {

namespace {

// Byte ranges of well-formed sequences (Unicode 15, table 3-7): the second
// byte's range depends on the lead; later bytes are 80..BF.
bool second_byte_ok(unsigned char lead, unsigned char second) {
  if (lead == 0xE0) {
    return second >= 0xA0 && second <= 0xBF;
  }
  if (lead == 0xED) {
    return second >= 0x80 && second <= 0x9F;
  }
  if (lead == 0xF0) {
    return second >= 0x90 && second <= 0xBF;
  }
  if (lead == 0xF4) {
    return second >= 0x80 && second <= 0x8F;
  }
  return second >= 0x80 && second <= 0xBF;
}

std::size_t expected_length(unsigned char lead) {
  if (lead < 0x80) {
    return 1;
  }
  if (lead >= 0xC2 && lead <= 0xDF) {
    return 2;
  }
  if (lead >= 0xE0 && lead <= 0xEF) {
    return 3;
  }
  if (lead >= 0xF0 && lead <= 0xF4) {
    return 4;
  }
  return 0;  // never a lead byte
}

// Length of the well-formed sequence at `position`, or of the maximal
// prefix of one (at least 1) when it is ill-formed, with `valid` telling which.
std::size_t scan_sequence(std::string_view text, std::size_t position, bool& valid) {
  auto lead = static_cast<unsigned char>(text[position]);
  std::size_t length = expected_length(lead);
  if (length == 1) {
    valid = true;
    return 1;
  }
  if (length == 0) {
    valid = false;
    return 1;
  }
  std::size_t taken = 1;
  while (taken < length && position + taken < text.size()) {
    auto byte = static_cast<unsigned char>(text[position + taken]);
    bool ok = taken == 1 ? second_byte_ok(lead, byte) : (byte >= 0x80 && byte <= 0xBF);
    if (!ok) {
      break;
    }
    ++taken;
  }
  valid = taken == length;
  return taken;
}

}  // namespace

bool is_valid_utf8(std::string_view text) {
  std::size_t position = 0;
  while (position < text.size()) {
    // Eight ASCII bytes at a time: most prompt text is ASCII.
    while (position + 8 <= text.size()) {
      std::uint64_t word = 0;
      std::memcpy(&word, text.data() + position, 8);
      if ((word & 0x8080808080808080ULL) != 0) {
        break;
      }
      position += 8;
    }
    if (position >= text.size()) {
      break;
    }
    if (static_cast<unsigned char>(text[position]) < 0x80) {
      ++position;
      continue;
    }
    bool valid = false;
    position += scan_sequence(text, position, valid);
    if (!valid) {
      return false;
    }
  }
  return true;
}

char32_t next_code_point(std::string_view text, std::size_t& position) {
  auto lead = static_cast<unsigned char>(text[position]);
  std::size_t length = utf8_sequence_length(lead);
  if (position + length > text.size()) {
    length = 1;
  }
  char32_t code_point = length == 1 ? lead : lead & (0x7F >> length);
  for (std::size_t index = 1; index < length; ++index) {
    code_point = (code_point << 6) | (static_cast<unsigned char>(text[position + index]) & 0x3F);
  }
  position += length;
  return code_point;
}

void append_utf8(std::string& out, char32_t code_point) {
  if (code_point < 0x80) {
    out.push_back(static_cast<char>(code_point));
  } else if (code_point < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (code_point >> 6)));
    out.push_back(static_cast<char>(0x80 | (code_point & 0x3F)));
  } else if (code_point < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (code_point >> 12)));
    out.push_back(static_cast<char>(0x80 | ((code_point >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (code_point & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (code_point >> 18)));
    out.push_back(static_cast<char>(0x80 | ((code_point >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((code_point >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (code_point & 0x3F)));
  }
}

std::string decode_utf8_lossy(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size());
  std::size_t position = 0;
  while (position < bytes.size()) {
    bool valid = false;
    std::size_t length = scan_sequence(bytes, position, valid);
    if (valid) {
      out.append(bytes.substr(position, length));
    } else {
      out.append("\xEF\xBF\xBD");
    }
    position += length;
  }
  return out;
}

bool is_javascript_whitespace(char32_t code_point) {
  switch (code_point) {
    case 0x09:
    case 0x0A:
    case 0x0B:
    case 0x0C:
    case 0x0D:
    case 0x20:
    case 0xA0:
    case 0x1680:
    case 0x2028:
    case 0x2029:
    case 0x202F:
    case 0x205F:
    case 0x3000:
    case 0xFEFF:
      return true;
    default:
      return code_point >= 0x2000 && code_point <= 0x200A;
  }
}

std::string_view trim_start_javascript(std::string_view text) {
  std::size_t position = 0;
  while (position < text.size()) {
    std::size_t next = position;
    if (!is_javascript_whitespace(next_code_point(text, next))) {
      break;
    }
    position = next;
  }
  return text.substr(position);
}

std::string_view trim_end_javascript(std::string_view text) {
  std::size_t end = text.size();
  while (end > 0) {
    std::size_t start = end - 1;
    while (start > 0 && (static_cast<unsigned char>(text[start]) & 0xC0) == 0x80) {
      --start;
    }
    std::size_t position = start;
    if (!is_javascript_whitespace(next_code_point(text, position))) {
      break;
    }
    end = start;
  }
  return text.substr(0, end);
}

}  // namespace kvgate
