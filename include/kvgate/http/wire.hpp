#pragma once
// HTTP/1.1 message heads and chunk framing written straight into a byte
// string, for the data plane's writes of every proxied request (the request
// to the worker, the response to the client). They are the bytes Beast's
// serializer writes for the same message; the serializer builds them as a
// view over several buffer sequences whose iteration and the composed write
// around it cost the proxy about a tenth of its CPU on a small request
// (BENCHMARKS.md), where a head built here is one contiguous string and a
// write is at most three buffers.
#include <array>
#include <cstddef>
#include <string>
#include <string_view>

#include "kvgate/http/beast.hpp"

namespace kvgate::http {

// Appends the start line, every field in its order and the blank line.
void append_head(const bhttp::request_header<>& head, std::string& out);
void append_head(const bhttp::response_header<>& head, std::string& out);

// How a message's body goes on the wire, piece by piece: as it is (the head
// gave a Content-Length, or the body runs to the close) or in chunks (RFC
// 9112 section 7.1; no extensions, no trailers).
class BodyFraming {
 public:
  explicit BodyFraming(bool chunked) : chunked_(chunked) {}

  // The buffers of one write: the message's head when `head` is given (the
  // first write), then `piece` of the body, then, when `last`, the end of
  // the body. A chunked empty piece is no chunk (a zero-sized chunk would
  // end the body). The buffers point into `piece` and this object, which
  // must outlive the write.
  std::array<asio::const_buffer, 3> write(const bhttp::response_header<>* head, std::string_view piece, bool last);

 private:
  bool chunked_;
  std::string before_;  // the head and a chunk's size line
  std::string after_;   // a chunk's CRLF, and the last chunk
};

}  // namespace kvgate::http
