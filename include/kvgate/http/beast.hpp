#pragma once
// Shared Asio/Beast vocabulary for the I/O shell. Every asynchronous call in
// kvgate completes with `use_nothrow`: errors arrive as error_code values,
// never as exceptions thrown out of a coroutine.
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "kvgate/core/result.hpp"

namespace kvgate::http {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
using tcp = boost::asio::ip::tcp;
using error_code = boost::system::error_code;

template <class T>
using awaitable = asio::awaitable<T>;

inline constexpr auto use_nothrow = asio::as_tuple(asio::use_awaitable);

// Removes the hop-by-hop headers of RFC 9110 section 7.6.1, including any
// header named in Connection; they describe one connection, not the message.
void strip_hop_by_hop(bhttp::fields& fields);

// Why a parsed request head must be refused before anything is forwarded
// (a 400 that closes the connection), or nullopt. Beast accepts what RFC
// 9112 lets a server accept; a proxy must not, because the next hop may
// read the same bytes differently (request smuggling, header injection):
// more than one Content-Length or Host, Transfer-Encoding in HTTP/1.0, a
// value holding CR, LF or NUL (what obsolete line folding leaves), and a
// target with dot segments, encoded dots or slashes, or a NUL.
std::optional<std::string_view> unsafe_request_head(const bhttp::request_header<>& head);

// Opens, binds and listens; with `reuse_port`, several acceptors (one per
// I/O thread) can share the port. Returns the bound endpoint (the real port
// when `endpoint` asked for port 0) or a message naming the address.
Result<tcp::endpoint, std::string> open_listener(tcp::acceptor& acceptor, const tcp::endpoint& endpoint,
                                                 bool reuse_port);

using StringRequest = bhttp::request<bhttp::string_body>;

// Feeds a parser the bytes already in `buffer` (consuming what it takes)
// until the message is done or they run out: what a read would parse before
// touching the socket. Returns the parser's error; "needs more bytes" and a
// full body buffer (a buffer body's piece is ready) are not errors.
template <bool IsRequest, class Body>
error_code parse_buffered(bhttp::parser<IsRequest, Body>& parser, beast::flat_buffer& buffer) {
  error_code error;
  while (!parser.is_done() && buffer.size() != 0) {
    const std::size_t used = parser.put(buffer.data(), error);
    buffer.consume(used);
    if (error == bhttp::error::need_more || error == bhttp::error::need_buffer) {
      return {};
    }
    if (error || used == 0) {
      break;
    }
  }
  return error;
}

// Reads one whole request with a body of at most `body_limit` bytes; empty
// when the peer closed, timed out or sent something unreadable. For the
// simple servers (admin, simulator, test upstream); the data plane reads in
// stages to answer each failure precisely.
awaitable<std::optional<StringRequest>> read_request(beast::tcp_stream& stream, beast::flat_buffer& buffer,
                                                     std::uint64_t body_limit);

// Waits until the peer closes the connection (true) without consuming any
// byte; returns false when the wait is cancelled or the peer sends data
// (a pipelined request: the peer is still there).
awaitable<bool> wait_until_peer_closes(tcp::socket& socket);

// The same watch as a plain completion handler (no coroutine frame, no
// parallel group around the caller's work: on a small request those cost the
// proxy several percent of its CPU). Calls `on_close` once if the peer
// closes while the watch lasts; ends without calling it when the peer sends
// data, or when the watch is destroyed (which cancels the socket's pending
// operations). The watch, the socket and `on_close`'s captures must live on
// the socket's one-threaded io_context; the socket must outlive the watch.
class PeerCloseWatch {
 public:
  PeerCloseWatch(tcp::socket& socket, std::function<void()> on_close);
  ~PeerCloseWatch();
  PeerCloseWatch(const PeerCloseWatch&) = delete;
  PeerCloseWatch& operator=(const PeerCloseWatch&) = delete;

 private:
  struct State;
  tcp::socket& socket_;
  std::shared_ptr<State> state_;  // shared with the pending handler, which may run after the watch ends
};

// Lower-cased, parameter-free media type: "text/event-stream".
std::string media_type(const bhttp::fields& fields);

}  // namespace kvgate::http
