#include "kvgate/proxy/relay.hpp"

#include <spdlog/spdlog.h>

#include <tuple>

#include "kvgate/core/clock.hpp"
#include "kvgate/http/wire.hpp"

namespace kvgate::proxy {

using namespace kvgate::http;

Relay::Relay(ClientSession& session, Exchange& exchange, const workers::WorkerState& worker,
             http::DeadlineStream& upstream, CancelLink& link, const config::Options& options, route::Attempt& attempt)
    : session_(session),
      exchange_(exchange),
      worker_(worker),
      upstream_(upstream),
      link_(link),
      options_(options),
      attempt_(attempt) {
  link_.upstream = &upstream_;
  parser_.body_limit(boost::none);  // the worker's answer is relayed, never held whole
}

awaitable<AttemptOutcome> Relay::run(UpstreamRequest& request, bool may_be_stale, bool retry_server_errors) {
  auto outcome = co_await send_and_read_header(request, may_be_stale);
  if (outcome.kind != AttemptOutcome::Kind::relayed) {
    co_return outcome;
  }
  if (const auto status = parser_.get().result_int(); retry_server_errors && status >= 500) {
    worker_.series().upstream_error(obs::UpstreamErrorKind::status_5xx);
    co_return AttemptOutcome::retry(
        openai::upstream_failure("worker " + worker_.id() + " answered " + std::to_string(status)),
        workers::FailureCause::status_5xx);
  }
  link_.answering = true;
  co_return co_await relay_body();
}

awaitable<AttemptOutcome> Relay::send_and_read_header(UpstreamRequest& request, bool may_be_stale) {
  upstream_.expires_after(options_.timeouts.upstream_response);
  wire_.clear();
  append_head(request, wire_);
  const std::array<asio::const_buffer, 2> request_bytes{asio::buffer(wire_), asio::buffer(request.body())};
  auto [write_error, written] = co_await asio::async_write(upstream_, request_bytes, use_nothrow);
  if (!write_error) {
    auto [read_error, read] = co_await bhttp::async_read_header(upstream_, upstream_buffer_, parser_, use_nothrow);
    write_error = read_error;
  }
  if (!write_error) {
    if (media_type(parser_.get()) != "text/event-stream") {
      attempt_.answering();
    }
    exchange_.first_byte_seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - exchange_.started).count();
    co_return AttemptOutcome{};
  }
  if (link_.client_gone) {
    co_return AttemptOutcome::client_left();
  }
  if (write_error == beast::error::timeout) {
    worker_.series().upstream_error(obs::UpstreamErrorKind::timeout);
    co_return AttemptOutcome::fail(
        openai::upstream_timeout("worker " + worker_.id() + " sent no response header within " +
                                 format_duration(options_.timeouts.upstream_response)),
        workers::FailureCause::timeout);
  }
  if (may_be_stale && !parser_.got_some()) {
    co_return AttemptOutcome{AttemptOutcome::Kind::stale_connection, std::nullopt, workers::FailureCause::none};
  }
  worker_.series().upstream_error(obs::UpstreamErrorKind::reset);
  if (parser_.got_some()) {
    co_return AttemptOutcome::fail(
        openai::upstream_failure("worker " + worker_.id() + " sent a malformed response: " + write_error.message()),
        workers::FailureCause::reset);
  }
  co_return AttemptOutcome::retry(
      openai::upstream_failure("worker " + worker_.id() + " closed the connection: " + write_error.message()),
      workers::FailureCause::reset);
}

void Relay::prepare_client_header() {
  auto& response = parser_.get();
  const bool upstream_chunked = response.chunked();
  event_stream_ = media_type(response) == "text/event-stream";
  strip_hop_by_hop(response);
  // A body delimited by the worker closing the connection is re-framed as
  // chunked so the client connection can stay open.
  const bool body_until_close = !upstream_chunked && !response.has_content_length() && !parser_.is_done();
  // Stripping kvgate's usage event changes the length: always chunked then.
  const bool stripping = exchange_.strip_usage_event && event_stream_;
  if (upstream_chunked || body_until_close || stripping) {
    response.erase(bhttp::field::content_length);
    response.chunked(true);
  }
  response.set("x-kvgate-worker", worker_.id());
  if (!exchange_.prefill_worker.empty()) {
    response.set("x-kvgate-prefill-worker", exchange_.prefill_worker);
  }
  response.set("x-request-id", exchange_.request_id);
  if (!exchange_.receipt.empty()) {
    response.set("x-kvgate-route", exchange_.receipt);
  }
  response.keep_alive(exchange_.keep_alive && !session_.context().draining());
  exchange_.status = response.result_int();
}

awaitable<AttemptOutcome> Relay::relay_body() {
  AttemptOutcome outcome;
  if (parser_.get().result_int() >= 500) {
    outcome.failure = workers::FailureCause::status_5xx;
    worker_.series().upstream_error(obs::UpstreamErrorKind::status_5xx);
  }
  prepare_client_header();
  auto& response = parser_.get();
  auto& client = session_.stream();
  BodyFraming framing(response.chunked());
  const bhttp::response_header<>* head = &response;  // goes out with the first write, then null
  // An event stream's header goes out at once (the client learns the request
  // was accepted before the first token); any other header goes out with the
  // first piece of its body, one write (and one loopback wakeup) fewer.
  if (event_stream_) {
    client.expires_after(options_.timeouts.client_write);
    auto [header_error, header_bytes] = co_await asio::async_write(client, framing.write(head, {}, false), use_nothrow);
    if (header_error) {
      link_.client_gone = true;
      co_return outcome;
    }
    head = nullptr;
  }
  // Invariant: every write carries a non-empty piece, or the final piece
  // (more = false), after which the client's message is complete.
  for (;;) {
    if (!parser_.is_done()) {
      response.body().data = chunk_.data();
      response.body().size = chunk_.size();
      // What came with the header (a small answer is one segment) is parsed
      // without a read (and without a trip through the scheduler).
      error_code read_error = parse_buffered(parser_, upstream_buffer_);
      if (!read_error && !parser_.is_done() && response.body().size == chunk_.size()) {
        upstream_.expires_after(options_.timeouts.upstream_idle);
        std::tie(read_error, std::ignore) =
            co_await bhttp::async_read_some(upstream_, upstream_buffer_, parser_, use_nothrow);
        if (read_error == bhttp::error::need_buffer) {
          read_error = {};
        }
      }
      if (read_error) {
        if (!link_.client_gone) {
          co_await end_interrupted_stream(read_error);
          outcome.failure =
              read_error == beast::error::timeout ? workers::FailureCause::timeout : workers::FailureCause::reset;
        }
        co_return outcome;
      }
      response.body().size = chunk_.size() - response.body().size;
      response.body().more = !parser_.is_done();
      response.body().data = chunk_.data();
    } else {
      response.body().data = nullptr;
      response.body().size = 0;
      response.body().more = false;
    }
    observe_piece(response.body());
    if (response.body().size == 0 && response.body().more) {
      continue;  // only framing was read, or an event is still incomplete
    }
    const bool last = !response.body().more;
    if (last) {
      attempt_.engine_done(monotonic_now_ms(),
                           {exchange_.status, exchange_.reported.prompt_tokens, exchange_.reported.completion_tokens,
                            exchange_.reported.cached_tokens});
    }
    exchange_.response_bytes += response.body().size;
    const std::string_view piece(static_cast<const char*>(response.body().data),
                                 response.body().data == nullptr ? 0 : response.body().size);
    const auto bytes = framing.write(head, piece, last);
    head = nullptr;
    if (asio::buffer_size(bytes) == 0) {
      break;  // the last piece was empty and the body needs no end marker
    }
    client.expires_after(options_.timeouts.client_write);
    auto [write_error, written] = co_await asio::async_write(client, bytes, use_nothrow);
    if (write_error) {
      spdlog::debug("request_id={} client write failed: {}", exchange_.request_id, write_error.message());
      link_.client_gone = true;
      link_.close_upstream();
      co_return outcome;
    }
    if (!response.body().more) {
      break;
    }
  }
  client.expires_never();
  reusable_ = parser_.keep_alive();
  co_return outcome;
}

void Relay::observe_piece(bhttp::buffer_body::value_type& piece) {
  std::string_view bytes(static_cast<const char*>(piece.data), piece.data == nullptr ? 0 : piece.size);
  if (event_stream_ && !bytes.empty() && exchange_.first_token_seconds < 0) {
    exchange_.first_token_seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - exchange_.started).count();
    attempt_.first_token(exchange_.first_token_seconds - exchange_.dispatched_seconds);
  }
  usage_.feed(bytes);
  if (!piece.more) {
    usage_.finish();
    exchange_.engine_done = true;
  }
  // Every piece: a client that leaves right after [DONE] must not lose the
  // engine's figures (the usage event comes before it).
  exchange_.reported = usage_.usage();
  if (event_stream_ && !exchange_.engine_done) {
    constexpr std::string_view kDone = "data: [DONE]";
    constexpr std::size_t kKeep = kDone.size() - 1;  // enough of the last piece to complete a split marker
    done_carry_.append(bytes.substr(0, kKeep));
    if (bytes.find(kDone) != std::string_view::npos || done_carry_.find(kDone) != std::string::npos) {
      exchange_.engine_done = true;
    }
    if (bytes.size() >= kKeep) {
      done_carry_.assign(bytes.substr(bytes.size() - kKeep));
    } else if (done_carry_.size() > kKeep) {
      done_carry_.erase(0, done_carry_.size() - kKeep);
    }
  }
  if (!exchange_.strip_usage_event || !event_stream_) {
    return;
  }
  stripped_.clear();
  stripper_.feed(bytes, stripped_);
  if (!piece.more) {
    stripper_.finish(stripped_);
  }
  piece.data = stripped_.data();
  piece.size = stripped_.size();
}

// The worker died or stalled mid-body. A stream gets one error event and the
// terminator, so an SDK reports an error instead of a silently short answer;
// any other body can only be cut off by closing the connection.
awaitable<void> Relay::end_interrupted_stream(const error_code& error) {
  const bool timed_out = error == beast::error::timeout;
  worker_.series().upstream_error(timed_out ? obs::UpstreamErrorKind::timeout
                                            : obs::UpstreamErrorKind::stream_interrupted);
  spdlog::warn("request_id={} worker={} response interrupted after {} bytes: {}", exchange_.request_id, worker_.id(),
               exchange_.response_bytes, error.message());
  exchange_.error_code = "upstream_stream_interrupted";
  if (!event_stream_ || !parser_.get().chunked()) {
    // Only closing the connection can tell the client the body is short.
    exchange_.keep_alive = false;
    co_return;
  }
  auto events = openai::stream_error_events(
      timed_out ? openai::upstream_timeout("worker " + worker_.id() + " sent nothing for " +
                                           format_duration(options_.timeouts.upstream_idle))
                : openai::upstream_stream_interrupted("worker " + worker_.id() + ": " + error.message()));
  auto& client = session_.stream();
  client.expires_after(options_.timeouts.client_write);
  auto [chunk_error, chunk_bytes] =
      co_await asio::async_write(client, bhttp::make_chunk(asio::buffer(events)), use_nothrow);
  if (!chunk_error) {
    co_await asio::async_write(client, bhttp::make_chunk_last(), use_nothrow);
  }
}

}  // namespace kvgate::proxy
