#include "kvgate/proxy/request_pipeline.hpp"

#include <spdlog/spdlog.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <random>

#include "kvgate/core/clock.hpp"
#include "kvgate/openai/request.hpp"
#include "kvgate/proxy/forwarder.hpp"
#include "kvgate/route/inference_request.hpp"
#include "kvgate/route/router.hpp"

namespace kvgate::proxy {

using namespace kvgate::http;

bool is_acceptable_request_id(std::string_view id) {
  return !id.empty() && id.size() <= 128 &&
         std::all_of(id.begin(), id.end(), [](char c) { return c > 0x20 && c < 0x7f; });
}

const route::ModelRoute* model_for_passthrough(const route::RoutingTable& table, std::string_view request_body,
                                               std::string& named_model) {
  if (!request_body.empty()) {
    auto body = nlohmann::json::parse(request_body, nullptr, false);
    if (body.is_object()) {
      auto model = body.find("model");
      if (model != body.end() && model->is_string()) {
        named_model = model->get<std::string>();
        return table.find_served(named_model).model;
      }
    }
  }
  for (const auto& model : table.models) {
    if (std::any_of(model.workers.begin(), model.workers.end(),
                    [](const auto& worker) { return worker.state->health().healthy(); })) {
      return &model;
    }
  }
  return table.models.empty() ? nullptr : &table.models.front();
}

namespace {

awaitable<void> handle_inference(ClientSession& session, ClientRequest& request, Exchange& exchange,
                                 const route::RoutingTable& table, openai::Endpoint endpoint) {
  const auto& sources = table.options->sessions.key_from;
  const openai::SessionKeyInput keys{
      sources, openai::session_header_values(sources, [&](std::string_view name) { return request[name]; })};
  auto prepared = route::prepare_inference(table, request.body(), endpoint, keys, *exchange.tenant, local_now());
  if (!prepared) {
    const auto& [error, model] = prepared.error();
    if (model != nullptr) {
      // The model's tokenisation refused the prompt (e.g. the template raised).
      exchange.model = model->name;
      if (error.code == "chat_template_error") {
        session.thread().stats().shared().template_error(model->name);
      }
      spdlog::info("request {}: model {}: {}", exchange.request_id, model->name, error.message);
    }
    co_await session.respond_error(exchange, error);
    co_return;
  }
  const auto& inference = *prepared;
  const auto& model = *inference.model;
  exchange.model = model.name;
  if (inference.prompt.exact) {
    const auto& prompt = inference.prompt;
    session.thread().stats().prompt_caches(model.name, {prompt.segment_hits, prompt.segment_misses,
                                                        prompt.iterations_replayed, prompt.iterations_evaluated});
  }
  // Admission: the tenant's budgets (prompt tokens as kvgate counted
  // them), then a slot within the in-flight limits, perhaps after a wait.
  auto& gate = session.thread().admission();
  if (auto refused = gate.check_rates(*exchange.tenant, inference.prompt.input_tokens, monotonic_now_ms())) {
    const bool tokens = refused->reason == admission::RefusalReason::prompt_tokens_per_minute;
    co_await session.respond_error(
        exchange, openai::rate_limited(std::string("Rate limit reached for ") +
                                           (tokens ? "prompt tokens" : "requests") + " per minute of tenant '" +
                                           exchange.tenant->name + "'. Retry after the time in Retry-After.",
                                       tokens, refused->retry_after_ms));
    co_return;
  }
  const auto session_key = inference.session_key();
  auto ticket = co_await gate.admit(exchange.table, model, *exchange.tenant, session.stream().socket(),
                                    session_key ? route::slot_hold_key(*session_key) : 0);
  if (!ticket) {
    const auto refused = ticket.error();
    if (refused.reason == admission::RefusalReason::abandoned) {
      exchange.client_gone = true;
      co_return;
    }
    const bool full = refused.reason == admission::RefusalReason::queue_full;
    co_await session.respond_error(
        exchange, openai::overloaded(full ? "The gateway's admission queue is full; retry later."
                                          : "No capacity freed up within the admission queue's maximum wait; "
                                            "retry later.",
                                     std::string(admission::to_string(refused.reason)), refused.retry_after_ms));
    co_return;
  }
  exchange.strip_usage_event =
      inference.summary.stream && !inference.summary.include_usage && !model.streams_carry_timings;
  if (!inference.cache_salt_override.empty()) {
    exchange.cache_salt_rewrite =
        Exchange::CacheSaltRewrite{inference.cache_salt_override, inference.summary.has_cache_salt_member};
  }
  co_await forward(
      session, request, exchange,
      ForwardTarget{table, model, inference.session_key(), &inference.prompt, inference.summary.session_key_source});
}

awaitable<void> handle_passthrough(ClientSession& session, ClientRequest& request, Exchange& exchange,
                                   const route::RoutingTable& table) {
  if (auto too_deep = openai::check_json_depth(request.body())) {
    co_await session.respond_error(exchange, *too_deep);
    co_return;
  }
  std::string named_model;
  const auto* model = model_for_passthrough(table, request.body(), named_model);
  if (model == nullptr) {
    co_await session.respond_error(exchange, openai::model_not_found(named_model));
    co_return;
  }
  exchange.model = model->name;
  co_await forward(session, request, exchange, ForwardTarget{table, *model, std::nullopt});
}

}  // namespace

std::string make_request_id() {
  thread_local std::mt19937_64 generator{std::random_device{}()};
  static constexpr char kHex[] = "0123456789abcdef";
  std::string id(32, '0');
  for (std::size_t half = 0; half < 2; ++half) {
    auto bits = generator();
    for (std::size_t digit = 0; digit < 16; ++digit) {
      id[half * 16 + digit] = kHex[(bits >> (digit * 4)) & 0xF];
    }
  }
  return id;
}

awaitable<void> handle_request(ClientSession& session, ClientRequest& request, Exchange& exchange) {
  const auto& table = exchange.table;
  exchange.explain = table->options->routing.receipt || request["x-kvgate-explain"] == "1";
  auto target = request.target();
  exchange.path = std::string(target.substr(0, target.find('?')));
  exchange.method = std::string(request.method_string());
  auto client_id = request["x-request-id"];
  exchange.request_id = is_acceptable_request_id(client_id) ? std::string(client_id) : make_request_id();
  exchange.trace = parse_traceparent(request["traceparent"]);

  auto& in_flight = session.thread().stats().shared().in_flight_requests();
  in_flight.Increment();
  struct Decrement {
    prometheus::Gauge& gauge;
    ~Decrement() { gauge.Decrement(); }
  } decrement{in_flight};

  const bool chat = exchange.path == "/v1/chat/completions";
  const bool completions = exchange.path == "/v1/completions";
  const bool models = exchange.path == "/v1/models";
  if (!exchange.path.starts_with("/v1/")) {
    co_await session.respond_error(exchange, openai::not_found(exchange.path));
  } else if ((chat || completions) && request.method() != bhttp::verb::post) {
    co_await session.respond_error(exchange, openai::method_not_allowed(exchange.method, exchange.path));
  } else if (models && request.method() != bhttp::verb::get) {
    co_await session.respond_error(exchange, openai::method_not_allowed(exchange.method, exchange.path));
  } else if (auto identity = table->tenants->authenticate(request[bhttp::field::authorization]); !identity) {
    // The reason, never the key.
    spdlog::info("request {}: authentication failed: {}", exchange.request_id, tenant::to_string(identity.error()));
    co_await session.respond_error(exchange, openai::unauthorized());
  } else if (exchange.tenant = *identity; chat || completions) {
    co_await handle_inference(session, request, exchange, *table,
                              chat ? openai::Endpoint::chat_completions : openai::Endpoint::completions);
  } else if (models) {
    co_await session.respond(exchange, 200, table->models_body);
  } else {
    co_await handle_passthrough(session, request, exchange, *table);
  }
}

}  // namespace kvgate::proxy
