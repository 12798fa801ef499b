#include "client.hpp"

#include <nlohmann/json.hpp>

namespace kvgate::load {

using namespace kvgate::http;
using nlohmann::json;

awaitable<error_code> Connection::ensure_connected() {
  if (connected_) {
    co_return error_code{};
  }
  buffer_.clear();
  auto resolver = tcp::resolver(stream_.get_executor());
  auto [resolve_error, endpoints] =
      co_await resolver.async_resolve(url_.authority.host, std::to_string(url_.authority.port), use_nothrow);
  if (resolve_error) {
    co_return resolve_error;
  }
  stream_.expires_after(std::chrono::seconds(10));
  auto [connect_error, endpoint] = co_await stream_.async_connect(endpoints, use_nothrow);
  connected_ = !connect_error;
  co_return connect_error;
}

awaitable<std::pair<int, std::string>> Connection::get(const std::string& path) {
  if (auto error = co_await ensure_connected()) {
    co_return std::pair{0, std::string()};
  }
  bhttp::request<bhttp::empty_body> request{bhttp::verb::get, path, 11};
  request.set(bhttp::field::host, url_.host_header);
  stream_.expires_after(std::chrono::seconds(30));
  auto [write_error, written] = co_await bhttp::async_write(stream_, request, use_nothrow);
  bhttp::response<bhttp::string_body> response;
  error_code read_error = write_error;
  if (!write_error) {
    auto [error, read] = co_await bhttp::async_read(stream_, buffer_, response, use_nothrow);
    read_error = error;
  }
  if (read_error || !response.keep_alive()) {
    connected_ = false;
    stream_.close();
  }
  co_return std::pair{read_error ? 0 : response.result_int(), response.body()};
}

awaitable<Answer> Connection::post(const std::string& path, const std::string& body,
                                   const std::optional<std::string>& session, bool explain) {
  Answer answer;
  const auto started = std::chrono::steady_clock::now();
  auto since_start = [&] {
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - started).count();
  };
  // A keep-alive connection the target closed while idle fails at once:
  // one fresh connection is tried before the request counts as failed.
  for (int attempt = 0; attempt < 2; ++attempt) {
    const bool reused = connected_;
    if (auto error = co_await ensure_connected()) {
      answer.error = "connect: " + error.message();
      co_return answer;
    }
    bhttp::request<bhttp::string_body> request{bhttp::verb::post, path, 11};
    request.set(bhttp::field::host, url_.host_header);
    request.set(bhttp::field::content_type, "application/json");
    if (session) {
      request.set("x-session-id", *session);
    }
    if (explain) {
      request.set("x-kvgate-explain", "1");
    }
    request.body() = body;
    request.prepare_payload();
    stream_.expires_after(std::chrono::minutes(5));
    auto [write_error, written] = co_await bhttp::async_write(stream_, request, use_nothrow);
    bhttp::response_parser<bhttp::string_body> parser;
    parser.body_limit(boost::none);
    error_code error = write_error;
    if (!error) {
      auto [header_error, header_bytes] = co_await bhttp::async_read_header(stream_, buffer_, parser, use_nothrow);
      error = header_error;
    }
    if (error) {
      connected_ = false;
      stream_.close();
      if (reused && attempt == 0) {
        continue;
      }
      answer.error = "transport: " + error.message();
      co_return answer;
    }
    while (!parser.is_done()) {
      auto [read_error, read] = co_await bhttp::async_read_some(stream_, buffer_, parser, use_nothrow);
      if (read_error) {
        connected_ = false;
        stream_.close();
        answer.error = "transport: " + read_error.message();
        co_return answer;
      }
      if (answer.ttft_ms < 0 && !parser.get().body().empty()) {
        answer.ttft_ms = since_start();
      }
    }
    answer.latency_ms = since_start();
    const auto& response = parser.get();
    answer.status = response.result_int();
    answer.worker = std::string(response["x-kvgate-worker"]);
    answer.receipt = std::string(response["x-kvgate-route"]);
    if (answer.worker.empty()) {
      // Behind another proxy (nginx, HAProxy): the simulator names itself.
      answer.worker = std::string(response["x-kvgate-sim-replica"]);
    }
    if (!response.keep_alive()) {
      connected_ = false;
      stream_.close();
    }
    if (answer.status != 200) {
      answer.error = "status_" + std::to_string(answer.status);
      co_return answer;
    }
    read_events(response.body(), answer);
    co_return answer;
  }
  co_return answer;
}

}  // namespace kvgate::load
