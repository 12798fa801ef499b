#include "kvgate/proxy/forwarder.hpp"

#include <spdlog/spdlog.h>
#include <array>
#include <utility>

#include "kvgate/core/clock.hpp"
#include "kvgate/proxy/relay.hpp"

namespace kvgate::proxy {

using namespace kvgate::http;

namespace {

using UpstreamRequest = bhttp::request<bhttp::string_body>;

// The client's request as the worker gets it: same method, target and body;
// end-to-end headers kept; Host names the worker; the request id added.
// The body moves over: the client's request is not read after this, and a
// long chat's body is hundreds of kilobytes.
UpstreamRequest make_upstream_request(ClientRequest& request, const Exchange& exchange) {
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
    upstream.body() = std::move(request.body());
  }
  if (const auto& rewrite = exchange.cache_salt_rewrite) {
    upstream.body() = openai::with_cache_salt(upstream.body(), rewrite->salt, rewrite->replaces_member);
  }
  // A key kvgate checked is the tenant's, not the engine's: never forwarded
  // (each attempt sets the worker's own, if it has one).
  if (exchange.table->tenants->authenticates()) {
    upstream.erase(bhttp::field::authorization);
  }
  upstream.prepare_payload();
  return upstream;
}

class Attempts {
 public:
  Attempts(ClientSession& session, Exchange& exchange, const ForwardTarget& target, CancelLink& link)
      : session_(session), exchange_(exchange), target_(target), link_(link) {}

  awaitable<void> run(ClientRequest& request) {
    auto upstream_request = make_upstream_request(request, exchange_);
    const auto& options = *target_.table.options;
    auto& router = session_.context().router();
    std::vector<std::size_t> excluded;
    std::optional<openai::ApiError> last_error;
    for (std::uint32_t try_number = 0; try_number <= options.upstream.retries; ++try_number) {
      route::RouteContext context{target_.session_key, session_.context().next_decision_sequence(), excluded,
                                  monotonic_now_ms(), target_.session_key_source};
      auto decision = router.decide(target_.table, target_.model, target_.prompt, context);
      if (!decision.worker) {
        if (!exchange_.route) {
          note_decision(std::move(decision));
        }
        break;
      }
      const auto chosen = *decision.worker;
      if (try_number == 0) {
        session_.thread().retry_budget().record_request(context.now_ms);
      } else {
        if (!session_.thread().retry_budget().try_retry(context.now_ms, options.upstream.retry_budget)) {
          session_.thread().stats().shared().retry_denied(target_.model.name);
          note_decision(std::move(decision));
          break;
        }
        ++exchange_.retries;
        session_.thread().stats().shared().retry(target_.model.name);
      }
      auto& attempt =
          exchange_.attempt.emplace(router.commit(target_.table, target_.model, decision, target_.prompt, context));
      note_decision(std::move(decision));
      auto& worker = *target_.model.workers[chosen].state;
      set_upstream_key(upstream_request, request, target_.model.workers[chosen].options);
      auto outcome = co_await try_worker(worker, upstream_request, attempt);
      const bool engine_refused = outcome.kind == AttemptOutcome::Kind::relayed && exchange_.status >= 400;
      const bool not_run = engine_refused || outcome.kind == AttemptOutcome::Kind::retryable;
      attempt.end(not_run ? route::AttemptEnd::not_run : route::AttemptEnd::served,
                  outcome.reached_worker ? std::optional(outcome.failure) : std::nullopt, monotonic_now_ms());
      if (outcome.kind != AttemptOutcome::Kind::retryable) {
        if (outcome.kind == AttemptOutcome::Kind::failed && !link_.client_gone) {
          co_await session_.respond_error(exchange_, *outcome.error);
        }
        co_return;
      }
      last_error = std::move(outcome.error);
      excluded.push_back(chosen);
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
  // The worker's configured key, else the client's header when kvgate does
  // not authenticate (a transparent proxy in front of engines that check
  // keys themselves), else none.
  void set_upstream_key(UpstreamRequest& upstream, const ClientRequest& request, const config::WorkerOptions& worker) {
    if (!worker.upstream_api_key.empty()) {
      upstream.set(bhttp::field::authorization, "Bearer " + worker.upstream_api_key);
    } else if (target_.table.tenants->authenticates() || request[bhttp::field::authorization].empty()) {
      upstream.erase(bhttp::field::authorization);
    } else {
      upstream.set(bhttp::field::authorization, request[bhttp::field::authorization]);
    }
  }

  // The exchange keeps the decision of the attempt that got the request
  // (decision log, receipt, the outcome's comparison).
  void note_decision(route::RouteDecision decision) {
    if (!exchange_.route) {
      if (target_.session_key) {
        exchange_.session = std::string(*target_.session_key);
        exchange_.session_source = target_.session_key_source;
      }
      exchange_.decision_log = session_.thread().decision_log();
    }
    exchange_.route_model = &target_.model;
    if (decision.worker) {
      exchange_.worker = target_.model.workers[*decision.worker].state->id();
      if (exchange_.explain) {
        exchange_.receipt = route::route_receipt(target_.model, decision);
      }
    }
    exchange_.route = std::move(decision);
  }

  awaitable<AttemptOutcome> try_worker(workers::WorkerState& worker, UpstreamRequest& upstream_request,
                                       route::Attempt& attempt) {
    const auto& options = *target_.table.options;
    auto& pool = session_.thread().pool();
    // optional<>: a tcp_stream can be moved but not move-assigned.
    std::optional<Result<UpstreamConnection, error_code>> connection;
    connection.emplace(co_await pool.acquire(worker, options.timeouts.upstream_connect));
    // A pooled connection the worker closed in the meantime fails before any
    // response byte; that is not the worker's fault, so try one fresh one.
    for (int fresh_tries = 0;; ++fresh_tries) {
      if (!*connection) {
        const auto& error = connection->error();
        worker.series().upstream_error(error == beast::error::timeout ? obs::UpstreamErrorKind::connect_timeout
                                                                      : obs::UpstreamErrorKind::connect);
        co_return AttemptOutcome::retry(
            openai::upstream_failure("cannot connect to worker " + worker.id() + ": " + error.message()),
            workers::FailureCause::connect);
      }
      if (link_.client_gone) {
        auto left = AttemptOutcome::client_left();
        left.reached_worker = false;
        co_return left;
      }
      auto& upstream = connection->value();
      Relay relay(session_, exchange_, worker, *upstream.stream, link_, options, attempt);
      auto outcome = co_await relay.run(upstream_request, upstream.reused && fresh_tries == 0);
      if (outcome.kind == AttemptOutcome::Kind::stale_connection) {
        connection.emplace(co_await pool.connect(worker, options.timeouts.upstream_connect));
        continue;
      }
      if (outcome.kind == AttemptOutcome::Kind::relayed && relay.upstream_reusable()) {
        pool.release(worker, std::move(upstream.stream));
      }
      co_return outcome;
    }
  }

  ClientSession& session_;
  Exchange& exchange_;
  const ForwardTarget& target_;
  CancelLink& link_;
};

}  // namespace

awaitable<void> forward(ClientSession& session, ClientRequest& request, Exchange& exchange,
                        const ForwardTarget& target) {
  CancelLink link;
  {
    // While the request is forwarded, a client that closes its connection
    // gets the upstream connection shut, so the engine aborts the
    // generation at once.
    PeerCloseWatch client_watch(session.stream().socket(), [&link] {
      if (!link.forward_done) {
        link.client_gone = true;
        link.close_upstream();
      }
    });
    Attempts attempts(session, exchange, target, link);
    co_await attempts.run(request);
    link.forward_done = true;
  }  // the watch ends: the client's socket has no pending wait left
  if (link.client_gone) {
    // The connection is gone either way; the exchange only failed when the
    // engine's answer was not complete yet.
    exchange.client_gone = !exchange.engine_done;
    exchange.keep_alive = false;
  }
}

}  // namespace kvgate::proxy
