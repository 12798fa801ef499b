#include "kvgate/http/wire.hpp"

namespace kvgate::http {

namespace {

void append_version(unsigned version, std::string& out) {
  out += "HTTP/";
  out += static_cast<char>('0' + (version / 10) % 10);
  out += '.';
  out += static_cast<char>('0' + version % 10);
}

void append_text(beast::string_view text, std::string& out) {
  out.append(text.data(), text.size());
}

void append_fields(const bhttp::fields& fields, std::string& out) {
  for (const auto& field : fields) {
    append_text(field.name_string(), out);
    out += ": ";
    append_text(field.value(), out);
    out += "\r\n";
  }
  out += "\r\n";
}

}  // namespace

void append_head(const bhttp::request_header<>& head, std::string& out) {
  append_text(head.method_string(), out);
  out += ' ';
  append_text(head.target(), out);
  out += ' ';
  append_version(head.version(), out);
  out += "\r\n";
  append_fields(head, out);
}

void append_head(const bhttp::response_header<>& head, std::string& out) {
  append_version(head.version(), out);
  // A status is three digits (Beast refuses any other when parsing or setting it).
  const unsigned status = head.result_int();
  out += ' ';
  out += static_cast<char>('0' + (status / 100) % 10);
  out += static_cast<char>('0' + (status / 10) % 10);
  out += static_cast<char>('0' + status % 10);
  out += ' ';
  append_text(head.reason(), out);
  out += "\r\n";
  append_fields(head, out);
}

std::array<asio::const_buffer, 3> BodyFraming::write(const bhttp::response_header<>* head, std::string_view piece,
                                                     bool last) {
  before_.clear();
  after_.clear();
  if (head != nullptr) {
    append_head(*head, before_);
  }
  if (chunked_) {
    if (!piece.empty()) {
      constexpr std::string_view kHex = "0123456789abcdef";
      char digits[2 * sizeof(std::size_t)];
      std::size_t count = 0;
      for (std::size_t size = piece.size(); size != 0; size >>= 4) {
        digits[count++] = kHex[size & 0xF];
      }
      while (count != 0) {
        before_ += digits[--count];
      }
      before_ += "\r\n";
      after_ += "\r\n";
    }
    if (last) {
      after_ += "0\r\n\r\n";
    }
  }
  return {asio::buffer(before_), asio::buffer(piece.data(), piece.size()), asio::buffer(after_)};
}

}  // namespace kvgate::http
