#include "kvgate/proxy/client_session.hpp"

#include <spdlog/spdlog.h>

#include <tuple>

#include "kvgate/core/clock.hpp"
#include "kvgate/proxy/decision_record.hpp"
#include "kvgate/proxy/request_pipeline.hpp"

namespace kvgate::proxy {

using namespace kvgate::http;

ClientSession::ClientSession(IoThread& thread, tcp::socket socket) : thread_(thread), stream_(std::move(socket)) {
  thread_.add(this);
  thread_.stats().shared().open_connections().Increment();
}

ClientSession::~ClientSession() {
  thread_.remove(this);
  error_code ignored;
  stream_.socket().shutdown(tcp::socket::shutdown_both, ignored);
  stream_.socket().close(ignored);
  thread_.stats().shared().open_connections().Decrement();
  context().close_connection();
}

awaitable<void> ClientSession::run(std::unique_ptr<ClientSession> session) {
  co_await session->serve();
}

void ClientSession::close_if_idle() {
  if (idle_) {
    error_code ignored;
    stream_.socket().cancel(ignored);
  }
}

awaitable<void> ClientSession::serve() {
  error_code ignored;
  stream_.socket().set_option(tcp::no_delay(true), ignored);
  bool first = true;
  while (!context().draining()) {
    if (!co_await serve_one(first)) {
      break;
    }
    first = false;
  }
  stream_.socket().shutdown(tcp::socket::shutdown_send, ignored);
}

awaitable<bool> ClientSession::serve_one(bool first_request) {
  auto table = thread_.table();
  const auto& options = *table->options;
  bhttp::request_parser<bhttp::string_body> parser;
  parser.header_limit(options.limits.max_header_bytes);
  parser.body_limit(options.limits.max_body_bytes);

  idle_ = buffer_.size() == 0;
  // Waiting for a new request is bounded by the keep-alive idle time; the
  // first request of a connection by the header deadline (slow-loris).
  stream_.expires_after(first_request ? options.timeouts.header_read : options.timeouts.keep_alive_idle);
  auto [header_error, ignored_bytes] = co_await bhttp::async_read_header(stream_, buffer_, parser, use_nothrow);
  idle_ = false;
  Exchange exchange;
  exchange.table = table;
  exchange.started = std::chrono::steady_clock::now();
  if (header_error) {
    // A connection that closes or idles out between requests is normal;
    // anything else half-read deserves an answer.
    if (parser.got_some() || header_error.category() == bhttp::make_error_code(bhttp::error::bad_method).category()) {
      co_await reject_unreadable(header_error, exchange, options.limits.max_body_bytes);
    }
    co_return false;
  }
  if (auto unsafe = unsafe_request_head(parser.get())) {
    exchange.request_id = make_request_id();
    exchange.keep_alive = false;
    spdlog::info("request {}: refused before forwarding: {}", exchange.request_id, *unsafe);
    co_await respond_error(exchange, openai::invalid_request("Malformed HTTP request: " + std::string(*unsafe) + ".",
                                                             {}, "bad_http_request"));
    finish(exchange);
    co_return false;
  }
  // A request with more header lines than any client sends is refused before
  // its body is read (the connection closes: the body is not read).
  const auto fields = static_cast<std::size_t>(std::distance(parser.get().begin(), parser.get().end()));
  if (fields > options.limits.max_header_fields) {
    exchange.request_id = make_request_id();
    exchange.keep_alive = false;
    auto error = openai::invalid_request("The request has " + std::to_string(fields) + " header fields; at most " +
                                             std::to_string(options.limits.max_header_fields) + " are accepted.",
                                         {}, "too_many_headers");
    error.status = 431;
    co_await respond_error(exchange, error);
    finish(exchange);
    co_return false;
  }
  if (parser.get()[bhttp::field::expect] == "100-continue" && !parser.is_done()) {
    bhttp::response<bhttp::empty_body> proceed{bhttp::status::continue_, 11};
    auto [continue_error, ignored] = co_await bhttp::async_write(stream_, proceed, use_nothrow);
    if (continue_error) {
      co_return false;
    }
  }
  // A small request's body usually came in the header's segment: parsed
  // from the buffer, it needs no read (and no trip through the scheduler).
  error_code body_error = parse_buffered(parser, buffer_);
  if (!body_error && !parser.is_done()) {
    stream_.expires_after(options.timeouts.body_read);
    std::tie(body_error, std::ignore) = co_await bhttp::async_read(stream_, buffer_, parser, use_nothrow);
  }
  if (body_error) {
    co_await reject_unreadable(body_error, exchange, options.limits.max_body_bytes);
    co_return false;
  }
  stream_.expires_never();
  auto request = parser.release();
  exchange.keep_alive = request.keep_alive();
  co_await handle_request(*this, request, exchange);
  finish(exchange);
  co_return exchange.keep_alive && !exchange.client_gone;
}

// The request could not be read whole: answer when the client can still
// hear it (413 for an oversized body, 400 for a malformed message, 408 for
// a deadline), then close, since the rest of the stream cannot be trusted.
awaitable<void> ClientSession::reject_unreadable(const error_code& error, Exchange& exchange,
                                                 std::uint64_t body_limit) {
  exchange.request_id = make_request_id();
  exchange.keep_alive = false;
  if (error == bhttp::error::body_limit) {
    co_await respond_error(exchange, openai::body_too_large(body_limit));
  } else if (error == bhttp::error::header_limit) {
    // RFC 6585: 431 Request Header Fields Too Large (the request line counts).
    auto too_large = openai::invalid_request("The request headers are too large.", {}, "headers_too_large");
    too_large.status = 431;
    co_await respond_error(exchange, too_large);
  } else if (error == beast::error::timeout) {
    auto timeout = openai::invalid_request("The request was not received in time.", {}, "request_timeout");
    timeout.status = 408;
    co_await respond_error(exchange, timeout);
  } else if (error.category() == bhttp::make_error_code(bhttp::error::bad_method).category() &&
             error != bhttp::error::end_of_stream && error != bhttp::error::partial_message) {
    co_await respond_error(
        exchange, openai::invalid_request("Malformed HTTP request: " + error.message(), {}, "bad_http_request"));
  } else {
    co_return;  // the client left mid-request; nobody to answer
  }
  finish(exchange);
}

awaitable<void> ClientSession::respond(Exchange& exchange, unsigned status, std::string body,
                                       std::string_view content_type, std::uint64_t retry_after_ms) {
  bhttp::response<bhttp::string_body> response{static_cast<bhttp::status>(status), 11};
  response.set(bhttp::field::server, "kvgate");
  if (retry_after_ms > 0) {
    response.set(bhttp::field::retry_after, std::to_string((retry_after_ms + 999) / 1000));
  }
  response.set(bhttp::field::content_type, content_type);
  response.set("x-request-id", exchange.request_id);
  response.keep_alive(exchange.keep_alive && !context().draining());
  response.body() = std::move(body);
  response.prepare_payload();
  exchange.status = static_cast<int>(status);
  exchange.response_bytes += response.body().size();
  stream_.expires_after(exchange.table->options->timeouts.client_write);
  auto [error, written] = co_await bhttp::async_write(stream_, response, use_nothrow);
  stream_.expires_never();
  if (error) {
    exchange.client_gone = true;
  }
}

awaitable<void> ClientSession::respond_error(Exchange& exchange, const openai::ApiError& error) {
  exchange.error_code = error.code;
  thread_.stats().shared().client_error(error.status, error.code);
  co_await respond(exchange, static_cast<unsigned>(error.status), openai::error_body(error), "application/json",
                   error.retry_after_ms);
}

void ClientSession::finish(Exchange& exchange) {
  auto elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - exchange.started).count();
  exchange.total_seconds = elapsed;
  record_outcome(context(), exchange);
  // The worker the request was routed to, whose series count it.
  obs::WorkerSeries* worker_series = nullptr;
  if (exchange.route && exchange.route->worker && exchange.route_model != nullptr) {
    worker_series = &exchange.route_model->workers[*exchange.route->worker].state->series();
  }
  thread_.stats().request_finished(exchange.model, worker_series, exchange.status, elapsed, exchange.first_byte_seconds,
                                   exchange.first_token_seconds);
  if (!exchange.table->options->access_log) {
    return;
  }
  // No prompt text here, by design: the request id links this line to the
  // decision log and the worker's own logs.
  spdlog::get("access")->info(
      "request_id={} method={} path={} tenant={} model={} worker={} status={} duration_ms={:.1f} ttfb_ms={:.1f} "
      "bytes={} retries={} reason={} error={} trace_id={}{}{}",
      exchange.request_id, exchange.method, exchange.path,
      exchange.tenant != nullptr ? std::string_view(exchange.tenant->name) : std::string_view("-"),
      exchange.model.empty() ? "-" : exchange.model, exchange.worker.empty() ? "-" : exchange.worker, exchange.status,
      elapsed * 1000, exchange.first_byte_seconds < 0 ? -1.0 : exchange.first_byte_seconds * 1000,
      exchange.response_bytes, exchange.retries,
      exchange.route ? policy::to_string(exchange.route->reason) : std::string_view("-"),
      exchange.error_code.empty() ? "-" : exchange.error_code,
      exchange.trace ? exchange.trace->trace_id_view() : std::string_view("-"),
      exchange.prefill_worker.empty() ? "" : " prefill_worker=" + exchange.prefill_worker,
      exchange.client_gone ? " client_gone=1" : "");
}

}  // namespace kvgate::proxy
