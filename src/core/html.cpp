#include "kvgate/core/html.hpp"

#include "kvgate/core/utf8.hpp"

namespace kvgate {

std::string html_escape(std::string_view text) {
  std::string valid;
  if (!is_valid_utf8(text)) {
    valid = decode_utf8_lossy(text);
    text = valid;
  }
  std::string escaped;
  escaped.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '&':
        escaped += "&amp;";
        break;
      case '<':
        escaped += "&lt;";
        break;
      case '>':
        escaped += "&gt;";
        break;
      case '"':
        escaped += "&quot;";
        break;
      case '\'':
        escaped += "&#39;";
        break;
      default:
        escaped += c;
    }
  }
  return escaped;
}

}  // namespace kvgate
