#include <sys/socket.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <string>
#include <vector>

#include "kvgate/http/beast.hpp"

#include "kvgate/core/ascii.hpp"

namespace kvgate::http {

void strip_hop_by_hop(bhttp::fields& fields) {
  std::vector<std::string> named;
  for (auto token : bhttp::token_list{fields[bhttp::field::connection]}) {
    named.emplace_back(token);
  }
  for (const auto& name : named) {
    fields.erase(name);
  }
  for (auto field : {bhttp::field::connection, bhttp::field::keep_alive, bhttp::field::proxy_connection,
                     bhttp::field::proxy_authenticate, bhttp::field::proxy_authorization, bhttp::field::te,
                     bhttp::field::trailer, bhttp::field::transfer_encoding, bhttp::field::upgrade}) {
    fields.erase(field);
  }
}

std::string media_type(const bhttp::fields& fields) {
  const auto value = fields[bhttp::field::content_type];
  return media_type_of(std::string_view(value.data(), value.size()));
}

Result<tcp::endpoint, std::string> open_listener(tcp::acceptor& acceptor, const tcp::endpoint& endpoint,
                                                 bool reuse_port) {
  using reuse_port_option = asio::detail::socket_option::boolean<SOL_SOCKET, SO_REUSEPORT>;
  error_code error;
  acceptor.open(endpoint.protocol(), error);
  if (!error) {
    acceptor.set_option(asio::socket_base::reuse_address(true), error);
  }
  if (!error && reuse_port) {
    acceptor.set_option(reuse_port_option(true), error);
  }
  if (!error) {
    acceptor.bind(endpoint, error);
  }
  if (!error) {
    acceptor.listen(asio::socket_base::max_listen_connections, error);
  }
  if (error) {
    return unexpected("cannot listen on " + endpoint.address().to_string() + ":" + std::to_string(endpoint.port()) +
                      ": " + error.message());
  }
  return acceptor.local_endpoint();
}

awaitable<std::optional<StringRequest>> read_request(beast::tcp_stream& stream, beast::flat_buffer& buffer,
                                                     std::uint64_t body_limit) {
  bhttp::request_parser<bhttp::string_body> parser;
  parser.body_limit(body_limit);
  auto [error, read] = co_await bhttp::async_read(stream, buffer, parser, use_nothrow);
  if (error) {
    co_return std::nullopt;
  }
  co_return parser.release();
}

namespace {

bool unsafe_target(std::string_view target) {
  const auto path = target.substr(0, target.find('?'));
  if (target.find('\0') != std::string_view::npos) {
    return true;
  }
  // Percent-encoded '.', '/' and '\\' may decode into a dot segment or a
  // different path at the next hop.
  for (std::size_t at = path.find('%'); at != std::string_view::npos; at = path.find('%', at + 1)) {
    const auto code = path.substr(at + 1, 2);
    if (code.size() == 2 &&
        (((code[0] == '2') && (code[1] == 'e' || code[1] == 'E' || code[1] == 'f' || code[1] == 'F')) ||
         ((code[0] == '5') && (code[1] == 'c' || code[1] == 'C')))) {
      return true;
    }
  }
  // Dot segments: "/./", "/../", or the path ending in "/." or "/..".
  for (std::size_t at = path.find("/."); at != std::string_view::npos; at = path.find("/.", at + 1)) {
    auto rest = path.substr(at + 1);
    const auto segment = rest.substr(0, rest.find('/'));
    if (segment == "." || segment == "..") {
      return true;
    }
  }
  return false;
}

}  // namespace

std::optional<std::string_view> unsafe_request_head(const bhttp::request_header<>& head) {
  if (head.count(bhttp::field::content_length) > 1) {
    return "more than one Content-Length header";
  }
  if (head.count(bhttp::field::host) > 1) {
    return "more than one Host header";
  }
  if (head.version() < 11 && head.count(bhttp::field::transfer_encoding) > 0) {
    return "Transfer-Encoding in an HTTP/1.0 request";
  }
  for (const auto& field : head) {
    if (field.value().find_first_of(std::string_view("\r\n\0", 3)) != std::string_view::npos) {
      return "a header value holds CR, LF or NUL (obsolete line folding is not accepted)";
    }
  }
  if (unsafe_target(head.target())) {
    return "the target has dot segments or encoded dots, slashes or backslashes";
  }
  return std::nullopt;
}

// Both watches peek one byte with a receive, not a readiness wait: Asio
// tries a receive at once (EAGAIN while the peer is quiet) and then waits on
// the registration it already has, where a readiness wait re-arms the
// descriptor with epoll_ctl each time (a system call per request) and woke
// up spuriously after the response was written. A peeked byte stays for the
// next read; a receive of nothing (end of stream) or an error is a close.
awaitable<bool> wait_until_peer_closes(tcp::socket& socket) {
  char byte = 0;
  auto [error, bytes] = co_await socket.async_receive(asio::buffer(&byte, 1), tcp::socket::message_peek, use_nothrow);
  if (error == asio::error::operation_aborted) {
    co_return false;
  }
  co_return error || bytes == 0;
}

struct PeerCloseWatch::State {
  std::function<void()> on_close;
  bool active = true;
  char byte = 0;  // the peek's buffer: lives as long as the pending handler
};

PeerCloseWatch::PeerCloseWatch(tcp::socket& socket, std::function<void()> on_close)
    : socket_(socket), state_(std::make_shared<State>(State{std::move(on_close)})) {
  // One peek: data (the peer is still there) or a close ends the watch either way.
  socket_.async_receive(asio::buffer(&state_->byte, 1), tcp::socket::message_peek,
                        [state = state_](error_code error, std::size_t bytes) {
                          // Inactive: the watch is gone, and the socket may be too.
                          if (!state->active || error == asio::error::operation_aborted) {
                            return;
                          }
                          if (error || bytes == 0) {
                            state->active = false;
                            state->on_close();
                          }
                        });
}

PeerCloseWatch::~PeerCloseWatch() {
  state_->active = false;
  error_code ignored;
  socket_.cancel(ignored);
}

}  // namespace kvgate::http
