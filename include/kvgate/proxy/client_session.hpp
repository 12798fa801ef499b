#pragma once
// One client connection: reads requests one after another (HTTP/1.1
// keep-alive), hands each to the request pipeline and writes the answer.
// Lifetime: the session object lives in its coroutine frame (see run());
// the owning IoThread only keeps a raw pointer while the frame is alive, and
// both live on the same thread.
#include <string>

#include "kvgate/http/beast.hpp"
#include "kvgate/http/deadline_stream.hpp"
#include "kvgate/openai/errors.hpp"
#include "kvgate/proxy/exchange.hpp"
#include "kvgate/proxy/io_thread.hpp"

namespace kvgate::proxy {

using ClientRequest = http::bhttp::request<http::bhttp::string_body>;

class ClientSession {
 public:
  ClientSession(IoThread& thread, http::tcp::socket socket);
  ClientSession(const ClientSession&) = delete;
  ClientSession& operator=(const ClientSession&) = delete;
  ~ClientSession();

  // Serves requests until the client leaves, an error ends the connection or
  // the gateway drains. Owns `session` for the duration.
  static http::awaitable<void> run(std::unique_ptr<ClientSession> session);

  // Closes the connection if it is waiting for the next request (drain).
  void close_if_idle();

  http::DeadlineStream& stream() { return stream_; }
  IoThread& thread() { return thread_; }
  gateway::GatewayContext& context() { return thread_.context(); }

  // Local answers. They set exchange.status, write, and record failures to
  // write (client gone) in the exchange.
  http::awaitable<void> respond(Exchange& exchange, unsigned status, std::string body,
                                std::string_view content_type = "application/json", std::uint64_t retry_after_ms = 0);
  http::awaitable<void> respond_error(Exchange& exchange, const openai::ApiError& error);

 private:
  http::awaitable<void> serve();
  // False when the connection must close after this request.
  http::awaitable<bool> serve_one(bool first_request);
  http::awaitable<void> reject_unreadable(const http::error_code& error, Exchange& exchange, std::uint64_t body_limit);
  void finish(Exchange& exchange);

  IoThread& thread_;
  http::DeadlineStream stream_;
  http::beast::flat_buffer buffer_;
  bool idle_ = true;
};

}  // namespace kvgate::proxy
