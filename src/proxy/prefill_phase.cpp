#include "kvgate/proxy/prefill_phase.hpp"

#include <spdlog/spdlog.h>
#include <nlohmann/json.hpp>

#include "kvgate/http/wire.hpp"

namespace kvgate::proxy {

using namespace kvgate::http;

namespace {

// A prefill answer is one token and the transfer parameters: anything this
// large is not one.
constexpr std::uint64_t kMaxPrefillAnswerBytes = 4 * 1024 * 1024;

// The engine's own words for a refusal, when its body says them.
std::string refusal_message(const std::string& body) {
  const auto parsed = nlohmann::json::parse(body, nullptr, false);
  if (parsed.is_object()) {
    if (auto error = parsed.find("error");
        error != parsed.end() && error->is_object() && error->contains("message") && (*error)["message"].is_string()) {
      return (*error)["message"].get<std::string>();
    }
    if (auto message = parsed.find("message"); message != parsed.end() && message->is_string()) {
      return message->get<std::string>();
    }
  }
  return body.substr(0, 200);
}

}  // namespace

awaitable<PrefillOutcome> run_prefill(ClientSession& session, const Exchange& exchange,
                                      const workers::WorkerState& worker, Relay::UpstreamRequest& request,
                                      CancelLink& link, bool json_answer) {
  const auto& options = *exchange.table->options;
  auto& pool = session.thread().pool();
  std::optional<Result<UpstreamConnection, error_code>> connection;
  connection.emplace(co_await pool.acquire(worker, options.timeouts.upstream_connect));
  for (int fresh_tries = 0;; ++fresh_tries) {
    PrefillOutcome outcome;
    if (!*connection) {
      worker.series().upstream_error(connection->error() == beast::error::timeout
                                         ? obs::UpstreamErrorKind::connect_timeout
                                         : obs::UpstreamErrorKind::connect);
      outcome.kind = PrefillOutcome::Kind::retryable;
      outcome.failure = workers::FailureCause::connect;
      outcome.error = openai::upstream_failure("cannot connect to prefill worker " + worker.id() + ": " +
                                               connection->error().message());
      co_return outcome;
    }
    if (link.client_gone) {
      outcome.kind = PrefillOutcome::Kind::client_left;
      outcome.reached_worker = false;
      co_return outcome;
    }
    auto& stream = *connection->value().stream;
    const bool may_be_stale = connection->value().reused && fresh_tries == 0;
    link.upstream = &stream;
    stream.expires_after(options.timeouts.prefill_response);
    auto [write_error, written] = co_await bhttp::async_write(stream, request, use_nothrow);
    beast::flat_buffer buffer;
    bhttp::response_parser<bhttp::string_body> parser;
    parser.body_limit(kMaxPrefillAnswerBytes);
    error_code error = write_error;
    if (!error) {
      std::tie(error, std::ignore) = co_await bhttp::async_read(stream, buffer, parser, use_nothrow);
    }
    link.upstream = nullptr;
    if (error) {
      if (link.client_gone) {
        outcome.kind = PrefillOutcome::Kind::client_left;
        co_return outcome;
      }
      if (may_be_stale && !parser.got_some() && error != beast::error::timeout) {
        connection.emplace(co_await pool.connect(worker, options.timeouts.upstream_connect));
        continue;
      }
      const bool timed_out = error == beast::error::timeout;
      worker.series().upstream_error(timed_out ? obs::UpstreamErrorKind::timeout : obs::UpstreamErrorKind::reset);
      outcome.kind = PrefillOutcome::Kind::retryable;
      outcome.failure = timed_out ? workers::FailureCause::timeout : workers::FailureCause::reset;
      outcome.error = timed_out ? openai::upstream_timeout("prefill worker " + worker.id() + " did not answer within " +
                                                           format_duration(options.timeouts.prefill_response))
                                : openai::upstream_failure("prefill worker " + worker.id() + ": " + error.message());
      co_return outcome;
    }
    auto response = parser.release();
    const auto status = response.result_int();
    if (response.keep_alive()) {
      pool.release(worker, std::move(connection->value().stream));
    }
    if (status >= 500) {
      worker.series().upstream_error(obs::UpstreamErrorKind::status_5xx);
      outcome.kind = PrefillOutcome::Kind::retryable;
      outcome.failure = workers::FailureCause::status_5xx;
      outcome.error = openai::upstream_failure("prefill worker " + worker.id() + " answered " + std::to_string(status) +
                                               ": " + refusal_message(response.body()));
      co_return outcome;
    }
    if (status >= 400) {
      outcome.kind = PrefillOutcome::Kind::refused;
      outcome.error = openai::ApiError{static_cast<int>(status), refusal_message(response.body()),
                                       status == 404 ? "not_found_error" : "invalid_request_error"};
      co_return outcome;
    }
    auto answer = openai::read_prefill_answer(response.body());
    if (!json_answer && status < 300) {
      if (answer) {
        outcome.answer = std::move(*answer);
      }
      co_return outcome;
    }
    if (status != 200 || !answer) {
      worker.series().upstream_error(obs::UpstreamErrorKind::reset);
      outcome.kind = PrefillOutcome::Kind::retryable;
      outcome.failure = workers::FailureCause::reset;
      outcome.error = openai::upstream_failure("prefill worker " + worker.id() + " answered " + std::to_string(status) +
                                               " without a JSON body");
      co_return outcome;
    }
    outcome.answer = std::move(*answer);
    co_return outcome;
  }
}

}  // namespace kvgate::proxy
