#pragma once
// One keep-alive HTTP/1.1 connection to the target, as an OpenAI SDK would
// hold it: POSTs a streaming request and reads the server-sent events as
// they come (time to the first event, the answer's text, its usage).
#include <chrono>
#include <optional>
#include <string>

#include "answer.hpp"
#include "kvgate/core/address.hpp"
#include "kvgate/http/beast.hpp"

namespace kvgate::load {

class Connection {
 public:
  Connection(http::asio::any_io_executor executor, HttpUrl url) : stream_(executor), url_(std::move(url)) {}

  // POST `path` with a JSON body; an event-stream answer is parsed as it
  // arrives, any other body kept as the error text. `explain`: ask kvgate
  // for its route receipt (Answer::receipt).
  http::awaitable<Answer> post(const std::string& path, const std::string& body,
                               const std::optional<std::string>& session, bool explain = false);
  // GET `path`: status and body ("" on connection failure).
  http::awaitable<std::pair<int, std::string>> get(const std::string& path);

 private:
  http::awaitable<http::error_code> ensure_connected();

  http::beast::tcp_stream stream_;
  HttpUrl url_;
  http::beast::flat_buffer buffer_;
  bool connected_ = false;
};

}  // namespace kvgate::load
