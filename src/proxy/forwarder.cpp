#include "kvgate/proxy/forwarder.hpp"

#include <spdlog/spdlog.h>

#include <array>
#include <boost/asio/detached.hpp>
#include <random>
#include <utility>

#include "kvgate/core/clock.hpp"
#include "kvgate/openai/disaggregation.hpp"
#include "kvgate/proxy/prefill_phase.hpp"
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
    // A failed remote prefill is placed again without counting as a retry:
    // each one excludes its prefill worker, so at worst the decoder
    // prefills, and a disaggregated request never fails for its prefill
    // pool alone.
    std::uint32_t prefill_replacements = 0;
    bool replacing_prefill = false;
    for (std::uint32_t try_number = 0; try_number <= options.upstream.retries + prefill_replacements; ++try_number) {
      route::RouteContext context{
          target_.session_key,
          session_.context().next_decision_sequence(),
          excluded,
          monotonic_now_ms(),
          target_.session_key_source,
          static_cast<std::uint64_t>(
              std::chrono::duration_cast<std::chrono::milliseconds>(exchange_.started.time_since_epoch()).count())};
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
      } else if (!std::exchange(replacing_prefill, false)) {
        if (!session_.thread().retry_budget().try_retry(context.now_ms, options.upstream.retry_budget)) {
          session_.thread().stats().shared().retry_denied(target_.model.name);
          note_decision(std::move(decision));
          break;
        }
        ++exchange_.retries;
        session_.thread().stats().shared().retry(target_.model.name);
      }
      if (decision.prefill) {
        session_.thread().stats().prefill_placement(target_.model.name, decision.prefill->reason);
      }
      exchange_.dispatched_seconds =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - exchange_.started).count();
      auto& attempt =
          exchange_.attempt.emplace(router.commit(target_.table, target_.model, decision, target_.prompt, context));
      note_decision(std::move(decision));
      auto& worker = *target_.model.workers[chosen].state;
      set_worker_headers(upstream_request, request, target_.model.workers[chosen].options);
      AttemptOutcome outcome;
      if (const auto prefill_index = attempt.prefill_worker_index()) {
        // One co_await per statement: g++ 12 destroys a conditional's
        // co_await temporaries wrongly (a heap corruption in release).
        Phases phases;
        if (target_.model.disaggregation->protocol == config::DisaggregationProtocol::vllm) {
          phases = co_await prefill_then_decode(*prefill_index, worker, request, upstream_request, attempt);
        } else {
          phases = co_await prefill_beside_decode(*prefill_index, worker, request, upstream_request, attempt);
        }
        if (phases.prefill_failed) {
          // The decoder was not asked, or was stopped for it: its try
          // tells its breaker nothing, and the next decision finds another
          // prefill worker, or lets the decoder prefill.
          attempt.end(route::AttemptEnd::not_run, std::nullopt, monotonic_now_ms());
          if (phases.prefill.kind == PrefillOutcome::Kind::client_left || link_.client_gone) {
            co_return;
          }
          if (phases.prefill.kind == PrefillOutcome::Kind::refused) {
            co_await session_.respond_error(exchange_, *phases.prefill.error);
            co_return;
          }
          session_.thread().stats().shared().prefill_failed(target_.model.name);
          last_error = std::move(phases.prefill.error);
          excluded.push_back(*prefill_index);
          ++prefill_replacements;
          replacing_prefill = true;
          continue;
        }
        outcome = std::move(phases.decode);
      } else {
        outcome = co_await try_worker(worker, upstream_request, attempt);
      }
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
  // What names the worker in its request: Host is its own address (HTTP/1.1
  // requires one, and strict servers such as fasthttp refuse a request
  // without it); the key is the worker's configured one, else the client's
  // header when kvgate does not authenticate (a transparent proxy in front
  // of engines that check keys themselves), else none.
  void set_worker_headers(UpstreamRequest& upstream, const ClientRequest& request,
                          const config::WorkerOptions& worker) {
    upstream.set(bhttp::field::host, worker.endpoint.host_header);
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

  // The two phases of a disaggregated request, as far as they got.
  struct Phases {
    bool prefill_failed = false;  // `prefill` says how; the decoder's try is void
    PrefillOutcome prefill;
    AttemptOutcome decode;
  };

  // The prefill worker's request, from the decoder's (same head, its own key).
  UpstreamRequest prefill_request(const UpstreamRequest& decode_request, const ClientRequest& request,
                                  std::size_t prefill_index, std::string body) {
    UpstreamRequest prefill = decode_request;
    prefill.body() = std::move(body);
    set_worker_headers(prefill, request, target_.model.workers[prefill_index].options);
    prefill.prepare_payload();
    return prefill;
  }

  void note_prefill_answer(route::Attempt& attempt, const PrefillOutcome& prefilled) {
    attempt.end_prefill(route::AttemptEnd::served, workers::FailureCause::none, monotonic_now_ms());
    attempt.prefill_answered(prefilled.answer.cached_tokens, prefilled.answer.prompt_tokens);
    exchange_.prefill_answered_seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - exchange_.started).count();
  }

  void end_failed_prefill(route::Attempt& attempt, const PrefillOutcome& prefilled) {
    const bool not_run = prefilled.kind != PrefillOutcome::Kind::client_left;
    attempt.end_prefill(not_run ? route::AttemptEnd::not_run : route::AttemptEnd::served,
                        prefilled.reached_worker && prefilled.kind == PrefillOutcome::Kind::retryable
                            ? std::optional(prefilled.failure)
                            : std::nullopt,
                        monotonic_now_ms());
  }

  // vLLM: the prefill worker answers one token and where its KV is; the
  // decoder then gets the client's request with those kv_transfer_params
  // and its answer is relayed.
  awaitable<Phases> prefill_then_decode(std::size_t prefill_index, workers::WorkerState& decoder,
                                        const ClientRequest& request, UpstreamRequest& decode_request,
                                        route::Attempt& attempt) {
    Phases phases;
    auto& prefill_worker = *target_.model.workers[prefill_index].state;
    auto prefill =
        prefill_request(decode_request, request, prefill_index, openai::vllm_prefill_body(decode_request.body()));
    exchange_.prefill_worker = prefill_worker.id();
    phases.prefill = co_await run_prefill(session_, exchange_, prefill_worker, prefill, link_, true);
    if (phases.prefill.kind != PrefillOutcome::Kind::answered) {
      end_failed_prefill(attempt, phases.prefill);
      exchange_.prefill_worker.clear();
      phases.prefill_failed = true;
      co_return phases;
    }
    note_prefill_answer(attempt, phases.prefill);
    if (phases.prefill.answer.kv_transfer_params.empty()) {
      // An engine without a KV connector answers like any engine: the
      // decoder prefills again, which costs time, not the answer.
      spdlog::warn(
          "request_id={} prefill worker {} answered without kv_transfer_params (is its KV connector "
          "configured?): the decoder prefills the prompt itself",
          exchange_.request_id, prefill_worker.id());
      phases.decode = co_await try_worker(decoder, decode_request, attempt, true);
      co_return phases;
    }
    auto with_params = decode_request;
    with_params.body() = openai::vllm_decode_body(decode_request.body(), phases.prefill.answer.kv_transfer_params);
    with_params.prepare_payload();
    phases.decode = co_await try_worker(decoder, with_params, attempt, true);
    co_return phases;
  }

  // SGLang: the same request, naming the prefill worker's bootstrap server
  // and a room, goes to both at once; the decoder waits for the room's KV
  // and its answer is relayed. A prefill worker that fails first stops the
  // decoder's try. A decoder that fails first may have failed for the
  // prefill (its room's KV never came), so the prefill's own answer, within
  // its timeout, says whose failure it was; only a client that left stops
  // the prefill at once.
  awaitable<Phases> prefill_beside_decode(std::size_t prefill_index, workers::WorkerState& decoder,
                                          const ClientRequest& request, UpstreamRequest& decode_request,
                                          route::Attempt& attempt) {
    Phases phases;
    const auto& prefill_route = target_.model.workers[prefill_index];
    auto& prefill_worker = *prefill_route.state;
    thread_local std::mt19937_64 rooms{std::random_device{}()};
    const auto room = rooms() >> 1;  // SGLang's rooms are non-negative 64-bit integers
    auto body = openai::sglang_pd_body(decode_request.body(), prefill_route.options.endpoint.authority.host,
                                       prefill_route.options.bootstrap_port, room);
    auto prefill = prefill_request(decode_request, request, prefill_index, body);
    auto with_room = decode_request;
    with_room.body() = std::move(body);
    with_room.prepare_payload();
    exchange_.prefill_worker = prefill_worker.id();

    struct Concurrent {
      explicit Concurrent(asio::any_io_executor executor) : done_signal(std::move(executor)) {
        done_signal.expires_at(std::chrono::steady_clock::time_point::max());
      }
      CancelLink link;
      bool done = false;
      PrefillOutcome outcome;
      asio::steady_timer done_signal;
    };
    auto concurrent = std::make_shared<Concurrent>(session_.stream().get_executor());
    link_.also = &concurrent->link;
    asio::co_spawn(
        session_.stream().get_executor(),
        [](std::shared_ptr<Concurrent> state, ClientSession& session, const Exchange& exchange,
           workers::WorkerState& worker, UpstreamRequest request, CancelLink& decode_link) -> awaitable<void> {
          state->outcome = co_await run_prefill(session, exchange, worker, request, state->link, false);
          state->done = true;
          if (state->outcome.kind != PrefillOutcome::Kind::answered && !decode_link.answering) {
            decode_link.abandoned = true;
            decode_link.close_upstream();
          }
          state->done_signal.cancel();
        }(concurrent, session_, exchange_, prefill_worker, std::move(prefill), link_),
        asio::detached);
    phases.decode = co_await try_worker(decoder, with_room, attempt, true);
    if (!concurrent->done && link_.client_gone) {
      concurrent->link.close_upstream();  // nothing will read the KV
    }
    while (!concurrent->done) {
      co_await concurrent->done_signal.async_wait(use_nothrow);
    }
    link_.also = nullptr;
    phases.prefill = std::move(concurrent->outcome);
    const bool relayed = link_.answering;
    link_.abandoned = false;
    link_.answering = false;
    if (phases.prefill.kind == PrefillOutcome::Kind::answered) {
      note_prefill_answer(attempt, phases.prefill);
    } else if (relayed || link_.client_gone) {
      // The decoder answered, so the KV arrived whatever the prefill
      // worker's own answer said; or the client left and stopped both.
      attempt.end_prefill(relayed ? route::AttemptEnd::served : route::AttemptEnd::not_run, std::nullopt,
                          monotonic_now_ms());
      if (!relayed) {
        exchange_.prefill_worker.clear();
      }
    } else {
      end_failed_prefill(attempt, phases.prefill);
      exchange_.prefill_worker.clear();
      phases.prefill_failed = true;
    }
    co_return phases;
  }

  // `decode_phase`: the decoder of a disaggregated request, whose server
  // error before anything was relayed (a failed KV transfer) is retried
  // with a new prefill rather than relayed.
  awaitable<AttemptOutcome> try_worker(workers::WorkerState& worker, UpstreamRequest& upstream_request,
                                       route::Attempt& attempt, bool decode_phase = false) {
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
      if (link_.abandoned) {
        auto stopped =
            AttemptOutcome::retry(openai::upstream_failure("the prefill failed"), workers::FailureCause::none);
        stopped.reached_worker = false;
        co_return stopped;
      }
      auto& upstream = connection->value();
      Relay relay(session_, exchange_, worker, *upstream.stream, link_, options, attempt);
      auto outcome = co_await relay.run(upstream_request, upstream.reused && fresh_tries == 0, decode_phase);
      if (outcome.kind == AttemptOutcome::Kind::stale_connection && link_.abandoned) {
        outcome = AttemptOutcome::retry(openai::upstream_failure("the prefill failed"), workers::FailureCause::none);
        outcome.reached_worker = false;
        co_return outcome;
      }
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
