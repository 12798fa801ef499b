#include "kvgate/proxy/forwarder.hpp"

#include <spdlog/spdlog.h>
#include <array>
#include <boost/asio/experimental/awaitable_operators.hpp>

#include "kvgate/proxy/relay.hpp"

namespace kvgate::proxy {

using namespace kvgate::http;
using namespace boost::asio::experimental::awaitable_operators;

namespace {

using UpstreamRequest = bhttp::request<bhttp::string_body>;

// The client's request as the worker gets it: same method, target and body;
// end-to-end headers kept; Host names the worker; the request id added.
UpstreamRequest make_upstream_request(const ClientRequest& request, const Exchange& exchange) {
  UpstreamRequest upstream{request.method(), request.target(), 11};
  for (const auto& field : request) {
    upstream.insert(field.name_string(), field.value());
  }
  strip_hop_by_hop(upstream);
  upstream.erase(bhttp::field::host);
  upstream.erase(bhttp::field::expect);
  upstream.erase(bhttp::field::content_length);
  upstream.set("x-request-id", exchange.request_id);
  upstream.keep_alive(true);
  if (exchange.strip_usage_event) {
    upstream.body() = openai::with_stream_usage(request.body());
  } else {
    upstream.body() = request.body();
  }
  upstream.prepare_payload();
  return upstream;
}

// Waits until the client closes its connection while the request is being
// forwarded; then shuts the upstream connection so the engine aborts the
// generation at once. Ends when the forward finishes (it cancels the wait).
awaitable<void> watch_client(tcp::socket& client, CancelLink& link) {
  // Awaited on its own statement: g++ 12 miscompiles co_await inside &&.
  const bool closed = co_await wait_until_peer_closes(client);
  if (closed && !link.forward_done) {
    link.client_gone = true;
    link.close_upstream();
  }
}

class Attempts {
 public:
  Attempts(ClientSession& session, Exchange& exchange, const ForwardTarget& target, CancelLink& link)
      : session_(session), exchange_(exchange), target_(target), link_(link) {}

  awaitable<void> run(const ClientRequest& request) {
    auto upstream_request = make_upstream_request(request, exchange_);
    const auto& options = *target_.table.options;
    std::vector<std::size_t> excluded;
    std::optional<openai::ApiError> last_error;
    for (std::uint32_t attempt = 0; attempt <= options.upstream.retries; ++attempt) {
      auto chosen = choose(excluded);
      if (!chosen) {
        break;
      }
      if (attempt > 0) {
        ++exchange_.retries;
        exchange_.route_reason = "retry";
        session_.context().metrics().retry(target_.model.name);
      }
      auto& worker = *target_.model.workers[*chosen];
      workers::InFlightRequest in_flight(worker, uncached_tokens(*chosen));
      auto outcome = co_await try_worker(worker, upstream_request, in_flight);
      in_flight.finish();
      if (outcome.kind != AttemptOutcome::Kind::retryable) {
        if (outcome.kind == AttemptOutcome::Kind::failed && !link_.client_gone) {
          co_await session_.respond_error(exchange_, *outcome.error);
        }
        co_return;
      }
      last_error = std::move(outcome.error);
      excluded.push_back(*chosen);
    }
    if (link_.client_gone) {
      co_return;
    }
    // Named first: g++ 12 frees a conditional's temporary wrongly when it
    // lives inside a co_await expression (found by ASan).
    auto error = last_error ? *last_error : openai::no_healthy_worker(target_.model.name);
    co_await session_.respond_error(exchange_, error);
  }

 private:
  std::uint32_t uncached_tokens(std::size_t worker) const {
    if (target_.prompt == nullptr || cached_.empty()) {
      return 0;
    }
    return target_.prompt->input_tokens - std::min(cached_[worker], target_.prompt->input_tokens);
  }

  std::optional<std::size_t> choose(const std::vector<std::size_t>& excluded) {
    const auto& workers = target_.model.workers;
    // One index lookup per request; retries reuse it.
    if (target_.prompt != nullptr && cached_.empty()) {
      cached_ = predicted_cached_tokens(target_.model, *target_.prompt);
    }
    std::array<policy::WorkerView, 64> inline_views;
    std::vector<policy::WorkerView> heap_views;
    std::span<policy::WorkerView> views;
    if (workers.size() <= inline_views.size()) {
      views = std::span(inline_views.data(), workers.size());
    } else {
      heap_views.resize(workers.size());
      views = heap_views;
    }
    for (std::size_t index = 0; index < workers.size(); ++index) {
      views[index] = worker_view(*workers[index], cached_.empty() ? 0 : cached_[index]);
    }
    const std::uint32_t input_tokens = target_.prompt != nullptr ? target_.prompt->input_tokens : 0;
    policy::RouteRequest route{target_.model.name, target_.session_key, session_.context().next_decision_sequence(),
                               excluded, input_tokens};
    if (target_.prompt != nullptr) {
      route.prompt_blocks = target_.prompt->blocks;
    }
    auto decision = target_.table.policy->decide(route, views);
    if (!exchange_.routed) {
      exchange_.routed = true;
      exchange_.policy = std::string(target_.table.policy->name());
      if (target_.session_key) {
        exchange_.session = std::string(*target_.session_key);
      }
      exchange_.decision_log = session_.context().decision_log();
      exchange_.input_tokens = input_tokens;
      if (decision.worker_index && !cached_.empty()) {
        exchange_.predicted_cached_tokens = cached_[*decision.worker_index];
      }
      if (exchange_.decision_log) {
        exchange_.candidates = std::move(decision.candidates);
      }
    }
    if (!decision.worker_index) {
      return std::nullopt;
    }
    // The chosen worker will hold these blocks once it has run the prompt:
    // the index learns it now, so that a burst sharing a new prefix follows
    // the first request instead of scattering before the engine's events.
    if (auto* ingestion = session_.context().ingestion(); ingestion != nullptr && target_.prompt != nullptr) {
      ingestion->assume(target_.model.cache, target_.model.slots[*decision.worker_index], target_.prompt->blocks);
    }
    exchange_.worker = workers[*decision.worker_index]->id();
    exchange_.route_reason = decision.reason;
    return decision.worker_index;
  }

  awaitable<AttemptOutcome> try_worker(workers::WorkerState& worker, UpstreamRequest& upstream_request,
                                       workers::InFlightRequest& in_flight) {
    const auto& options = *target_.table.options;
    auto& metrics = session_.context().metrics();
    auto& pool = session_.thread().pool();
    // optional<>: a tcp_stream can be moved but not move-assigned.
    std::optional<Result<UpstreamConnection, error_code>> connection;
    connection.emplace(co_await pool.acquire(worker, options.timeouts.upstream_connect));
    // A pooled connection the worker closed in the meantime fails before any
    // response byte; that is not the worker's fault, so try one fresh one.
    for (int fresh_tries = 0;; ++fresh_tries) {
      if (!*connection) {
        const auto& error = connection->error();
        metrics.upstream_error(worker.id(), error == beast::error::timeout ? "connect_timeout" : "connect");
        note_traffic(worker, true);
        co_return AttemptOutcome::retry(
            openai::upstream_failure("cannot connect to worker " + worker.id() + ": " + error.message()));
      }
      if (link_.client_gone) {
        co_return AttemptOutcome::client_left();
      }
      auto& upstream = connection->value();
      Relay relay(session_, exchange_, worker, *upstream.stream, link_, options, in_flight);
      auto outcome = co_await relay.run(upstream_request, upstream.reused && fresh_tries == 0);
      if (outcome.kind == AttemptOutcome::Kind::stale_connection) {
        connection.emplace(co_await pool.connect(worker, options.timeouts.upstream_connect));
        continue;
      }
      if (outcome.kind == AttemptOutcome::Kind::relayed && relay.upstream_reusable()) {
        pool.release(worker, std::move(upstream.stream));
      }
      note_traffic(worker, outcome.worker_failed);
      co_return outcome;
    }
  }

  void note_traffic(workers::WorkerState& worker, bool failure) {
    if (worker.record_traffic(failure, target_.table.thresholds) == workers::HealthChange::went_down) {
      spdlog::warn("worker {} marked down after {} consecutive failed requests", worker.id(),
                   target_.table.thresholds.passive_failures);
    }
  }

  ClientSession& session_;
  Exchange& exchange_;
  const ForwardTarget& target_;
  CancelLink& link_;
  std::vector<std::uint32_t> cached_;  // per worker: predicted cached tokens
};

awaitable<void> run_attempts(ClientSession& session, const ClientRequest& request, Exchange& exchange,
                             const ForwardTarget& target, CancelLink& link) {
  Attempts attempts(session, exchange, target, link);
  co_await attempts.run(request);
  link.forward_done = true;
  error_code ignored;
  session.stream().socket().cancel(ignored);  // ends watch_client
}

}  // namespace

awaitable<void> forward(ClientSession& session, ClientRequest& request, Exchange& exchange,
                        const ForwardTarget& target) {
  CancelLink link;
  co_await (run_attempts(session, request, exchange, target, link) && watch_client(session.stream().socket(), link));
  if (link.client_gone) {
    exchange.client_gone = true;
    exchange.keep_alive = false;
  }
}

}  // namespace kvgate::proxy
