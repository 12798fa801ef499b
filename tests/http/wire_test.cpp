// The data plane writes heads and chunks itself; the bytes must be the ones
// Beast's serializer writes for the same message, which these tests take
// as the reference (its serializer, driven piece by piece).
#include "kvgate/http/wire.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace kvgate::http {
namespace {

std::string concatenate(const std::array<asio::const_buffer, 3>& buffers) {
  std::string bytes;
  for (const auto& buffer : buffers) {
    bytes.append(static_cast<const char*>(buffer.data()), buffer.size());
  }
  return bytes;
}

// Everything Beast's serializer has to write now (until it needs the next
// piece of a buffer body, or the message is done).
template <bool IsRequest, class Body>
std::string drain(bhttp::serializer<IsRequest, Body>& serializer) {
  std::string bytes;
  error_code error;
  while (!serializer.is_done()) {
    std::size_t taken = 0;
    serializer.next(error, [&](error_code&, const auto& buffers) {
      for (const auto buffer : beast::buffers_range_ref(buffers)) {
        bytes.append(static_cast<const char*>(buffer.data()), buffer.size());
        taken += buffer.size();
      }
    });
    if (error == bhttp::error::need_buffer) {
      break;
    }
    EXPECT_FALSE(error) << error.message();
    serializer.consume(taken);
  }
  return bytes;
}

template <class Header>
std::string beast_head(Header& message) {
  bhttp::serializer<Header::is_request::value, bhttp::empty_body> serializer(message);
  return drain(serializer);
}

TEST(Wire, ARequestHeadIsTheBytesBeastWrites) {
  bhttp::request<bhttp::empty_body> request{bhttp::verb::post, "/v1/chat/completions?x=1", 11};
  request.set(bhttp::field::content_type, "application/json");
  request.insert("X-Custom-Case", "Value with spaces");
  request.insert("x-repeated", "one");
  request.insert("x-repeated", "two");
  request.set(bhttp::field::content_length, "17");
  request.set("x-empty", "");
  std::string ours;
  append_head(request, ours);
  EXPECT_EQ(ours, beast_head(request));
  EXPECT_EQ(ours.substr(0, ours.find('\r')), "POST /v1/chat/completions?x=1 HTTP/1.1");

  bhttp::request<bhttp::empty_body> old{bhttp::verb::get, "/v1/models", 10};
  ours.clear();
  append_head(old, ours);
  EXPECT_EQ(ours, beast_head(old));
  EXPECT_EQ(ours, "GET /v1/models HTTP/1.0\r\n\r\n");
}

TEST(Wire, AResponseHeadIsTheBytesBeastWrites) {
  for (const unsigned status : {200U, 204U, 404U, 429U, 503U, 599U}) {
    bhttp::response<bhttp::empty_body> response{static_cast<bhttp::status>(status), 11};
    response.set(bhttp::field::content_type, "text/event-stream");
    response.set("x-kvgate-worker", "w0");
    std::string ours;
    append_head(response, ours);
    EXPECT_EQ(ours, beast_head(response)) << status;
  }
  // A reason the worker sent is kept; HTTP/1.0 stays 1.0.
  bhttp::response_parser<bhttp::empty_body> parser;
  error_code error;
  const std::string_view wire = "HTTP/1.0 418 I Am A Teapot Today\r\nServer: test\r\nContent-Length: 0\r\n\r\n";
  parser.put(asio::buffer(wire.data(), wire.size()), error);
  ASSERT_FALSE(error) << error.message();
  std::string ours;
  append_head(parser.get(), ours);
  EXPECT_EQ(ours, beast_head(parser.get()));
  EXPECT_EQ(ours, wire);
}

// The pieces of one body, written with the framing and with Beast's
// serializer over a buffer body, as the relay hands them over.
void expect_body_as_beast_writes(bool chunked, const std::vector<std::string>& pieces, bool last_piece_empty) {
  bhttp::response<bhttp::buffer_body> response{bhttp::status::ok, 11};
  response.set("x-kvgate-worker", "w1");
  if (chunked) {
    response.chunked(true);
  } else {
    std::size_t total = 0;
    for (const auto& piece : pieces) {
      total += piece.size();
    }
    response.content_length(total);
  }
  bhttp::response_serializer<bhttp::buffer_body> serializer(response);
  BodyFraming framing(chunked);
  std::string beast_bytes;
  std::string our_bytes;
  const bhttp::response_header<>* head = &response;
  for (std::size_t index = 0; index < pieces.size(); ++index) {
    const bool last = !last_piece_empty && index + 1 == pieces.size();
    response.body().data = const_cast<char*>(pieces[index].data());
    response.body().size = pieces[index].size();
    response.body().more = !last;
    beast_bytes += drain(serializer);
    our_bytes += concatenate(framing.write(head, pieces[index], last));
    head = nullptr;
  }
  if (last_piece_empty) {
    response.body().data = nullptr;
    response.body().size = 0;
    response.body().more = false;
    beast_bytes += drain(serializer);
    our_bytes += concatenate(framing.write(head, {}, true));
  }
  EXPECT_TRUE(serializer.is_done());
  EXPECT_EQ(our_bytes, beast_bytes);
}

TEST(Wire, ChunkedPiecesAreFramedAsBeastFramesThem) {
  // Sizes around hex digit boundaries; the end alone or with the last piece.
  const std::vector<std::string> pieces{"a",
                                        std::string(15, 'b'),
                                        std::string(16, 'c'),
                                        std::string(255, 'd'),
                                        std::string(256, 'e'),
                                        std::string(16 * 1024, 'f')};
  expect_body_as_beast_writes(true, pieces, true);
  expect_body_as_beast_writes(true, pieces, false);
  expect_body_as_beast_writes(true, {"data: {}\n\n"}, false);
  expect_body_as_beast_writes(true, {}, true);  // no body: the last chunk alone
  std::string ours = concatenate(BodyFraming(true).write(nullptr, std::string(0x1a2b, 'x'), false));
  EXPECT_EQ(ours.substr(0, 6), "1a2b\r\n");
  EXPECT_EQ(ours.substr(ours.size() - 2), "\r\n");
}

TEST(Wire, ALengthDelimitedBodyGoesOutAsItIs) {
  expect_body_as_beast_writes(false, {"{\"id\":1}", std::string(300, 'z')}, true);
  expect_body_as_beast_writes(false, {"{\"id\":1}"}, false);
  EXPECT_EQ(concatenate(BodyFraming(false).write(nullptr, "abc", true)), "abc");
  EXPECT_EQ(concatenate(BodyFraming(false).write(nullptr, {}, true)), "");
}

}  // namespace
}  // namespace kvgate::http
