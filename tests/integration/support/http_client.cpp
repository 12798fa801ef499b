#include "http_client.hpp"

#include <algorithm>
#include <array>
#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <cctype>
#include <stdexcept>

namespace kvgate::testing {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = boost::beast::http;
using tcp = asio::ip::tcp;

namespace {

std::string lower(std::string text) {
  std::transform(text.begin(), text.end(), text.begin(), [](unsigned char c) { return std::tolower(c); });
  return text;
}

// Blocking calls are async operations run to completion on a private
// io_context, so beast::tcp_stream's deadline applies (sync socket calls in
// Asio ignore SO_RCVTIMEO and would wait forever on a hung server).
template <class Start>
boost::system::error_code run_op(asio::io_context& io, Start&& start) {
  boost::system::error_code result = asio::error::would_block;
  start([&](boost::system::error_code error, std::size_t) { result = error; });
  io.restart();
  io.run();
  return result;
}

void connect(asio::io_context& io, beast::tcp_stream& stream, int port, std::chrono::milliseconds timeout) {
  stream.expires_after(timeout);
  boost::system::error_code result;
  stream.async_connect(tcp::endpoint(asio::ip::make_address("127.0.0.1"), static_cast<unsigned short>(port)),
                       [&](boost::system::error_code error) { result = error; });
  io.restart();
  io.run();
  if (result) {
    throw std::runtime_error("connect to port " + std::to_string(port) + " failed: " + result.message());
  }
}

http::request<http::string_body> make_request(const std::string& method, const std::string& target,
                                              const std::string& body, const Headers& headers) {
  http::request<http::string_body> request{http::string_to_verb(method), target, 11};
  request.set(http::field::host, "127.0.0.1");
  for (const auto& [name, value] : headers) {
    request.set(name, value);
  }
  if (!body.empty()) {
    request.set(http::field::content_type, "application/json");
    request.body() = body;
  }
  request.prepare_payload();
  return request;
}

template <class Message>
std::map<std::string, std::string> header_map(const Message& message) {
  std::map<std::string, std::string> headers;
  for (const auto& field : message) {
    headers[lower(std::string(field.name_string()))] = std::string(field.value());
  }
  return headers;
}

void check(const boost::system::error_code& error, const char* what) {
  if (error) {
    throw std::runtime_error(std::string(what) + " failed: " + error.message());
  }
}

}  // namespace

std::string HttpResponse::header(const std::string& name) const {
  auto found = headers.find(lower(name));
  return found == headers.end() ? std::string() : found->second;
}

HttpResponse http_request(int port, const std::string& method, const std::string& target, const std::string& body,
                          const Headers& headers, std::chrono::milliseconds timeout) {
  asio::io_context io;
  beast::tcp_stream stream(io);
  connect(io, stream, port, timeout);
  auto request = make_request(method, target, body, headers);
  request.keep_alive(false);
  stream.expires_after(timeout);
  check(run_op(io, [&](auto handler) { http::async_write(stream, request, handler); }), "write");
  beast::flat_buffer buffer;
  http::response_parser<http::string_body> parser;
  parser.body_limit(64 * 1024 * 1024);
  check(run_op(io, [&](auto handler) { http::async_read(stream, buffer, parser, handler); }), "read");
  HttpResponse response;
  response.status = parser.get().result_int();
  response.headers = header_map(parser.get());
  response.body = parser.get().body();
  return response;
}

HttpResponse post_json(int port, const std::string& target, const std::string& body, const Headers& headers) {
  return http_request(port, "POST", target, body, headers);
}

HttpResponse get(int port, const std::string& target) {
  return http_request(port, "GET", target);
}

std::string raw_exchange(int port, const std::string& bytes, std::chrono::milliseconds timeout) {
  asio::io_context io;
  beast::tcp_stream stream(io);
  connect(io, stream, port, timeout);
  stream.expires_after(timeout);
  check(run_op(io, [&](auto handler) { asio::async_write(stream, asio::buffer(bytes), handler); }), "write");
  std::string received;
  std::array<char, 4096> chunk{};
  for (;;) {
    std::size_t count = 0;
    auto error = run_op(io, [&](auto handler) {
      stream.async_read_some(asio::buffer(chunk), [&, handler](boost::system::error_code error, std::size_t n) {
        count = n;
        handler(error, n);
      });
    });
    received.append(chunk.data(), count);
    if (error) {
      break;
    }
  }
  return received;
}

struct EventStream::State {
  asio::io_context io;
  beast::tcp_stream stream{io};
  beast::flat_buffer buffer;
  http::response_parser<http::string_body> parser;
  std::size_t consumed = 0;  // bytes of the body already returned as events
};

EventStream::EventStream(int port, const std::string& target, const std::string& body, const Headers& headers)
    : state_(std::make_unique<State>()) {
  auto timeout = std::chrono::milliseconds(10'000);
  connect(state_->io, state_->stream, port, timeout);
  auto request = make_request("POST", target, body, headers);
  state_->stream.expires_after(timeout);
  check(run_op(state_->io, [&](auto handler) { http::async_write(state_->stream, request, handler); }), "write");
  state_->parser.body_limit(64 * 1024 * 1024);
  check(run_op(state_->io,
               [&](auto handler) { http::async_read_header(state_->stream, state_->buffer, state_->parser, handler); }),
        "read header");
}

EventStream::~EventStream() = default;

int EventStream::status() const {
  return state_->parser.get().result_int();
}

std::string EventStream::header(const std::string& name) const {
  return std::string(state_->parser.get()[name]);
}

std::optional<std::string> EventStream::next_event(std::chrono::milliseconds timeout) {
  for (;;) {
    const auto& body = state_->parser.get().body();
    auto end = body.find("\n\n", state_->consumed);
    if (end != std::string::npos) {
      auto event = body.substr(state_->consumed, end - state_->consumed);
      state_->consumed = end + 2;
      if (event.starts_with("data: ")) {
        return event.substr(6);
      }
      continue;
    }
    if (state_->parser.is_done()) {
      return std::nullopt;
    }
    state_->stream.expires_after(timeout);
    check(run_op(state_->io,
                 [&](auto handler) { http::async_read_some(state_->stream, state_->buffer, state_->parser, handler); }),
          "stream read");
  }
}

std::vector<std::string> EventStream::rest() {
  std::vector<std::string> events;
  while (auto event = next_event()) {
    events.push_back(*event);
  }
  return events;
}

std::vector<std::string> EventStream::until_done() {
  std::vector<std::string> events;
  while (auto event = next_event()) {
    events.push_back(*event);
    if (*event == "[DONE]") {
      break;
    }
  }
  close();
  return events;
}

void EventStream::close() {
  boost::system::error_code ignored;
  state_->stream.socket().shutdown(tcp::socket::shutdown_both, ignored);
  state_->stream.socket().close(ignored);
}

}  // namespace kvgate::testing
