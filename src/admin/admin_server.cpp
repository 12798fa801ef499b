#include "kvgate/admin/admin_server.hpp"

#include <spdlog/spdlog.h>

namespace kvgate::admin {

using namespace kvgate::http;

Result<tcp::endpoint, std::string> AdminServer::bind(const tcp::endpoint& endpoint) {
  return open_listener(acceptor_, endpoint, /*reuse_port=*/false);
}

void AdminServer::start() {
  asio::co_spawn(io_, accept_loop(), [](const std::exception_ptr&) {});
}

void AdminServer::stop() {
  error_code ignored;
  acceptor_.close(ignored);
}

awaitable<void> AdminServer::accept_loop() {
  while (acceptor_.is_open()) {
    auto [error, socket] = co_await acceptor_.async_accept(use_nothrow);
    if (error == asio::error::operation_aborted || !acceptor_.is_open()) {
      co_return;
    }
    if (!error) {
      asio::co_spawn(io_, serve(std::move(socket)), [](const std::exception_ptr&) {});
    }
  }
}

awaitable<void> AdminServer::serve(tcp::socket socket) {
  beast::tcp_stream stream(std::move(socket));
  beast::flat_buffer buffer;
  for (;;) {
    stream.expires_after(std::chrono::seconds(30));
    auto read = co_await read_request(stream, buffer, 4 * 1024 * 1024);
    if (!read) {
      co_return;
    }
    auto& request = *read;
    std::string_view target = request.target();
    auto reply = handle_admin_request(context_, request.method(), target, request.body(),
                                      [&](std::string_view name) { return std::string_view(request[name]); });
    bhttp::response<bhttp::string_body> response{static_cast<bhttp::status>(reply.status), 11};
    response.set(bhttp::field::server, "kvgate-admin");
    response.set(bhttp::field::content_type, reply.content_type);
    response.keep_alive(request.keep_alive());
    response.body() = std::move(reply.body);
    response.prepare_payload();
    auto [write_error, written] = co_await bhttp::async_write(stream, response, use_nothrow);
    if (write_error || !response.keep_alive()) {
      co_return;
    }
  }
}

}  // namespace kvgate::admin
