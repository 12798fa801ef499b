#pragma once
// One attempt against one worker over one upstream connection: send the
// request, read the response header, then relay the body to the client as it
// arrives, in pieces of at most kRelayBufferBytes (server-sent events pass
// through one by one, never buffered whole).
#include <array>
#include <optional>

#include "kvgate/openai/errors.hpp"
#include "kvgate/proxy/client_session.hpp"
#include "kvgate/route/attempt.hpp"
#include "kvgate/workers/worker_state.hpp"

namespace kvgate::proxy {

// Ties the client connection to the upstream connection of the current
// attempt, so that a client that leaves closes the upstream at once (engines
// abort a generation when its connection closes) and a finished forward stops
// watching the client. Both sides run on the same thread.
struct CancelLink {
  http::DeadlineStream* upstream = nullptr;
  bool forward_done = false;
  bool client_gone = false;
  // A disaggregated request whose phases run at once (SGLang): the prefill
  // worker's link, closed with this one.
  CancelLink* also = nullptr;
  // The worker's response is being relayed to the client (the try can no
  // longer be moved).
  bool answering = false;
  // The try was stopped because its other phase failed: not the worker's
  // fault, and not to be resent to it.
  bool abandoned = false;

  void close_upstream() {
    if (upstream != nullptr) {
      http::error_code ignored;
      upstream->socket().shutdown(http::tcp::socket::shutdown_both, ignored);
      upstream->socket().close(ignored);
    }
    if (also != nullptr) {
      also->client_gone = client_gone;
      also->close_upstream();
    }
  }
};

struct AttemptOutcome {
  enum class Kind {
    relayed,           // a response went to the client (possibly cut short)
    retryable,         // failed before any response byte: another worker may serve it
    failed,            // failed in a way a retry would not fix (timeout): answer `error`
    client_left,       // the client went away; nobody to answer
    stale_connection,  // a pooled connection was already closed: reconnect, same worker
  };
  Kind kind = Kind::relayed;
  std::optional<openai::ApiError> error;
  // The worker's fault, if any: counts toward its ejection (circuit breaker).
  workers::FailureCause failure = workers::FailureCause::none;
  // False when the client left before anything was sent: the try tells the
  // worker's breaker nothing.
  bool reached_worker = true;

  static AttemptOutcome retry(openai::ApiError error, workers::FailureCause cause) {
    return {Kind::retryable, std::move(error), cause};
  }
  static AttemptOutcome fail(openai::ApiError error, workers::FailureCause cause) {
    return {Kind::failed, std::move(error), cause};
  }
  static AttemptOutcome client_left() { return {Kind::client_left, std::nullopt, workers::FailureCause::none}; }
};

class Relay {
 public:
  static constexpr std::size_t kRelayBufferBytes = 16 * 1024;
  using UpstreamRequest = http::bhttp::request<http::bhttp::string_body>;

  Relay(ClientSession& session, Exchange& exchange, const workers::WorkerState& worker, http::DeadlineStream& upstream,
        CancelLink& link, const config::Options& options, route::Attempt& attempt);
  Relay(const Relay&) = delete;
  Relay& operator=(const Relay&) = delete;
  ~Relay() { link_.upstream = nullptr; }

  // `may_be_stale`: the connection came from the pool and this is its first
  // use here; an early failure then means "reconnect", not "worker failed".
  // `retry_server_errors`: a 5xx header is not relayed but retryable (a
  // disaggregated request's decoder that could not get the prompt's KV).
  http::awaitable<AttemptOutcome> run(UpstreamRequest& request, bool may_be_stale, bool retry_server_errors = false);

  // The whole response was read and the worker allows keep-alive.
  [[nodiscard]] bool upstream_reusable() const { return reusable_; }

 private:
  http::awaitable<AttemptOutcome> send_and_read_header(UpstreamRequest& request, bool may_be_stale);
  void prepare_client_header();
  http::awaitable<AttemptOutcome> relay_body();
  http::awaitable<void> end_interrupted_stream(const http::error_code& error);
  // Reads usage from a piece of the response body; when kvgate added
  // include_usage, replaces the piece with what the client gets.
  void observe_piece(http::bhttp::buffer_body::value_type& piece);

  ClientSession& session_;
  Exchange& exchange_;
  const workers::WorkerState& worker_;
  http::DeadlineStream& upstream_;
  CancelLink& link_;
  const config::Options& options_;
  // Finished as soon as the worker's response is read whole, before the last
  // write to the client: the client may send its next request the moment it
  // has the answer, and that routing decision must see the worker as free.
  route::Attempt& attempt_;
  std::string wire_;  // the request's head as the worker gets it
  http::beast::flat_buffer upstream_buffer_;
  http::bhttp::response_parser<http::bhttp::buffer_body> parser_;
  std::array<char, kRelayBufferBytes> chunk_;  // not zeroed: only read after a read filled it
  bool event_stream_ = false;
  bool reusable_ = false;
  openai::UsageScanner usage_;
  openai::UsageEventStripper stripper_;
  std::string stripped_;    // the piece as the client gets it, when stripping
  std::string done_carry_;  // the end of the previous piece: "data: [DONE]" may be split
};

}  // namespace kvgate::proxy
