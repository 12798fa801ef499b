#include <sys/socket.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <string>
#include <vector>

#include "kvgate/http/beast.hpp"

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
  auto value = fields[bhttp::field::content_type];
  auto end = value.find(';');
  std::string type(value.substr(0, end));
  while (!type.empty() && type.back() == ' ') {
    type.pop_back();
  }
  std::transform(type.begin(), type.end(), type.begin(),
                 [](unsigned char character) { return static_cast<char>(std::tolower(character)); });
  return type;
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

awaitable<bool> wait_until_peer_closes(tcp::socket& socket) {
  for (;;) {
    auto [error] = co_await socket.async_wait(tcp::socket::wait_read, use_nothrow);
    if (error == asio::error::operation_aborted) {
      co_return false;
    }
    if (error) {
      co_return true;
    }
    char byte = 0;
    auto peeked = ::recv(socket.native_handle(), &byte, 1, MSG_PEEK | MSG_DONTWAIT);
    if (peeked > 0) {
      co_return false;
    }
    if (peeked == 0 || (errno != EAGAIN && errno != EWOULDBLOCK)) {
      co_return true;
    }
  }
}

}  // namespace kvgate::http
