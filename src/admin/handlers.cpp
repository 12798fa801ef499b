#include <nlohmann/json.hpp>

#include "kvgate/admin/admin_server.hpp"
#include "kvgate/openai/request.hpp"
#include "kvgate/proxy/decision_record.hpp"

namespace kvgate::admin {

using nlohmann::json;
namespace bhttp = http::bhttp;

namespace {

AdminResponse json_response(unsigned status, const json& body) {
  return {status, "application/json", body.dump()};
}

AdminResponse error_response(const openai::ApiError& error) {
  return {static_cast<unsigned>(error.status), "application/json", openai::error_body(error)};
}

AdminResponse readiness(proxy::GatewayContext& context) {
  auto table = context.table();
  json models = json::object();
  bool ready = !context.draining();
  for (const auto& model : table->models) {
    std::size_t healthy = 0;
    for (const auto& worker : model.workers) {
      healthy += worker->healthy() ? 1 : 0;
    }
    models[model.name] = {{"healthy_workers", healthy}, {"workers", model.workers.size()}};
    ready = ready && healthy > 0;
  }
  return json_response(ready ? 200 : 503,
                       {{"ready", ready}, {"draining", context.draining()}, {"models", std::move(models)}});
}

AdminResponse metrics(proxy::GatewayContext& context) {
  auto table = context.table();
  for (const auto& worker : table->all_workers()) {
    context.metrics().set_worker_state(worker->id(), worker->healthy(), worker->in_flight());
  }
  return {200, "text/plain; version=0.0.4; charset=utf-8", context.metrics().serialize()};
}

AdminResponse debug_workers(proxy::GatewayContext& context) {
  auto table = context.table();
  json workers = json::array();
  for (std::size_t model_index = 0; model_index < table->models.size(); ++model_index) {
    const auto& model = table->models[model_index];
    const auto& model_options = table->options->models[model_index];
    for (std::size_t index = 0; index < model.workers.size(); ++index) {
      const auto& worker = *model.workers[index];
      const auto& worker_options = model_options.workers[index];
      workers.push_back({
          {"id", worker.id()},
          {"model", model.name},
          {"url", worker.url()},
          {"healthy", worker.healthy()},
          {"in_flight", worker.in_flight()},
          {"kv_events", worker_options.kv_events.empty() ? json(nullptr) : json(worker_options.kv_events)},
      });
    }
  }
  return json_response(200, {{"policy", table->policy->name()}, {"workers", std::move(workers)}});
}

// Dry run of the routing decision: same inspection and policy as a real
// request, nothing forwarded, no counter moved.
AdminResponse debug_route(proxy::GatewayContext& context, std::string_view body, std::string_view session_header) {
  auto parsed = json::parse(body, nullptr, false);
  auto endpoint = parsed.is_object() && parsed.contains("prompt") && !parsed.contains("messages")
                      ? openai::Endpoint::completions
                      : openai::Endpoint::chat_completions;
  auto summary = openai::inspect_request(body, endpoint, session_header);
  if (!summary) {
    return error_response(summary.error());
  }
  auto table = context.table();
  const auto* model = table->find_model(summary->model);
  if (model == nullptr) {
    return error_response(openai::model_not_found(summary->model));
  }
  std::vector<policy::WorkerView> views;
  for (const auto& worker : model->workers) {
    views.push_back({worker->id(), worker->healthy(), worker->in_flight()});
  }
  std::optional<std::string_view> session_key;
  if (summary->session_key) {
    session_key = *summary->session_key;
  }
  auto decision = table->policy->decide({model->name, session_key, 0, {}}, views);
  json worker = decision.worker_index ? json(model->workers[*decision.worker_index]->id()) : json(nullptr);
  return json_response(200, {{"worker", std::move(worker)},
                             {"reason", decision.reason},
                             {"policy", table->policy->name()},
                             {"session", session_key ? json(*session_key) : json(nullptr)},
                             {"input_tokens", nullptr},
                             {"candidates", proxy::candidates_json(decision.candidates)}});
}

}  // namespace

AdminResponse handle_admin_request(proxy::GatewayContext& context, bhttp::verb method, std::string_view path,
                                   std::string_view body, std::string_view session_header) {
  const bool get = method == bhttp::verb::get;
  if (path == "/healthz" && get) {
    return json_response(200, {{"status", "ok"}});
  }
  if (path == "/readyz" && get) {
    return readiness(context);
  }
  if (path == "/metrics" && get) {
    return metrics(context);
  }
  if (path == "/debug/workers" && get) {
    return debug_workers(context);
  }
  if (path == "/debug/route" && method == bhttp::verb::post) {
    return debug_route(context, body, session_header);
  }
  for (std::string_view known : {"/healthz", "/readyz", "/metrics", "/debug/workers", "/debug/route"}) {
    if (path == known) {
      return error_response(openai::method_not_allowed(std::string(bhttp::to_string(method)), path));
    }
  }
  return error_response(openai::not_found(path));
}

}  // namespace kvgate::admin
