#include "kvgate/proxy/decision_record.hpp"

#include "kvgate/core/clock.hpp"
#include "kvgate/gateway/context.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>

#include "kvgate/route/explain.hpp"

namespace kvgate::proxy {

using nlohmann::json;

namespace {

json optional_number(double value) {
  return value < 0 ? json(nullptr) : json(value);
}

json optional_count(const std::optional<std::uint32_t>& value) {
  return value ? json(*value) : json(nullptr);
}

json route_runner_up(const Exchange& exchange, const route::RouteDecision& route) {
  if (!route.runner_up || exchange.route_model == nullptr) {
    return nullptr;
  }
  return exchange.route_model->workers[*route.runner_up].state->id();
}

// The chosen worker's expected first token (what the decision priced, to
// set against ttft_ms); null for policies that price none.
json chosen_expected_ttft(const route::RouteDecision& route) {
  if (!route.worker || *route.worker >= route.candidates.size() ||
      route.candidates[*route.worker].expected_ttft_ms < 0) {
    return nullptr;
  }
  return route.candidates[*route.worker].expected_ttft_ms;
}

}  // namespace

std::string decision_record(const Exchange& exchange, double unix_seconds) {
  // A stream's first token is its first body byte (its header comes at
  // once); any other answer's first token is only visible as its header.
  const double first_token =
      exchange.first_token_seconds >= 0 ? exchange.first_token_seconds : exchange.first_byte_seconds;
  const double ttft_ms = first_token < 0 ? -1 : first_token * 1000;
  const double decode_ms = first_token < 0 ? -1 : (exchange.total_seconds - first_token) * 1000;
  static const route::RouteDecision kNotRouted;
  const auto& route = exchange.route ? *exchange.route : kNotRouted;
  const bool routed = exchange.route.has_value() && route.worker.has_value();
  const std::uint64_t session_turn = exchange.attempt ? exchange.attempt->session_turn() : 0;
  json record = {
      {"ts", unix_seconds},
      {"request_id", exchange.request_id},
      {"trace_id", exchange.trace ? json(exchange.trace->trace_id_view()) : json(nullptr)},
      {"session", exchange.session ? json(*exchange.session) : json(nullptr)},
      {"session_source", exchange.session ? json(exchange.session_source) : json(nullptr)},
      {"tenant", exchange.tenant != nullptr ? json(exchange.tenant->name) : json(nullptr)},
      {"model", exchange.model},
      {"worker", exchange.worker.empty() ? json(nullptr) : json(exchange.worker)},
      {"prefill_worker", exchange.prefill_worker.empty() ? json(nullptr) : json(exchange.prefill_worker)},
      {"policy", exchange.table->policy->name()},
      {"reason", policy::to_string(route.reason)},
      {"policy_reason", policy::to_string(route.policy_reason)},
      {"session_turn", session_turn == 0 ? json(nullptr) : json(session_turn)},
      {"input_tokens", route.input_tokens == 0 ? json(nullptr) : json(route.input_tokens)},
      {"predicted_cached_tokens", routed ? json(route.indexed_cached_tokens) : json(nullptr)},
      {"best_cached_tokens", routed ? json(route.best_cached_tokens) : json(nullptr)},
      {"work_price", optional_number(route.work_price)},
      {"kv_usage", route.kv_usage ? json(*route.kv_usage) : json(nullptr)},
      {"runner_up", route_runner_up(exchange, route)},
      {"gap_ms", optional_number(route.gap_ms)},
      {"expected_ttft_ms", chosen_expected_ttft(route)},
      {"candidates", route::candidates_json(route.candidates)},
      {"prefill", route::prefill_json(route)},
      {"status", exchange.status},
      {"cached_tokens", optional_count(exchange.reported.cached_tokens)},
      {"ttft_ms", optional_number(ttft_ms)},
      {"dispatch_ms", routed ? json(exchange.dispatched_seconds * 1000) : json(nullptr)},
      {"decode_ms", optional_number(decode_ms)},
      {"output_tokens", optional_count(exchange.reported.completion_tokens)},
      {"retries", exchange.retries},
      {"client_gone", exchange.client_gone},
  };
  // Session keys come from clients: never let a byte sequence that is not
  // UTF-8 break the line (replaced, not thrown).
  return record.dump(-1, ' ', false, json::error_handler_t::replace);
}

void record_outcome(gateway::GatewayContext& context, Exchange& exchange) {
  const double elapsed = exchange.total_seconds;
  if (exchange.attempt) {
    const double ttft = exchange.first_token_seconds >= 0 ? exchange.first_token_seconds : exchange.first_byte_seconds;
    // The worker's first token counts from the attempt's dispatch: a wait
    // in the admission queue was not the worker's.
    const double worker_ttft = std::max(0.0, ttft - exchange.dispatched_seconds);
    exchange.attempt->complete(
        {exchange.status, exchange.retries, exchange.reported.cached_tokens, exchange.reported.prompt_tokens,
         ttft < 0 ? std::nullopt : std::optional<double>(worker_ttft * 1000), exchange.first_token_seconds >= 0,
         exchange.reported.completion_tokens, ttft < 0 ? std::nullopt : std::optional<double>((elapsed - ttft) * 1000),
         exchange.prefill_answered_seconds >= 0 && exchange.first_token_seconds >= 0
             ? std::optional<double>((exchange.first_token_seconds - exchange.prefill_answered_seconds) * 1000)
             : std::nullopt});
  }
  if (exchange.route && exchange.route->worker) {
    obs::RoutedRequest routed;
    routed.unix_ms = unix_now_ms();
    routed.request_id.assign(exchange.request_id);
    routed.model.assign(exchange.model);
    routed.worker.assign(exchange.worker);
    routed.prefill_worker.assign(exchange.prefill_worker);
    routed.reason.assign(policy::to_string(exchange.route->reason));
    if (exchange.session) {
      routed.session.assign(*exchange.session);
    }
    routed.input_tokens = exchange.route->input_tokens;
    routed.predicted_cached_tokens = exchange.route->indexed_cached_tokens;
    if (exchange.status == 200) {
      routed.prompt_tokens = exchange.reported.prompt_tokens;
      routed.cached_tokens = exchange.reported.cached_tokens;
    }
    if (exchange.first_token_seconds >= 0) {
      routed.ttft_ms = exchange.first_token_seconds * 1000;
    }
    routed.status = exchange.status;
    context.activity().record(routed);
  }
  if (exchange.decision_log) {
    exchange.decision_log->write(decision_record(exchange, unix_now_seconds()));
  }
}

}  // namespace kvgate::proxy
