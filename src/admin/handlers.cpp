#include <nlohmann/json.hpp>

#include "kvgate/admin/admin_server.hpp"
#include "kvgate/openai/request.hpp"
#include "kvgate/proxy/decision_record.hpp"
#include "kvgate/proxy/prefix_lookup.hpp"

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
  for (std::size_t model_index = 0; model_index < table->models.size(); ++model_index) {
    const auto& model = table->models[model_index];
    for (std::size_t index = 0; index < model.workers.size(); ++index) {
      const auto& worker = *model.workers[index];
      const auto& stream = worker.event_stream();
      const bool events_configured = !table->options->models[model_index].workers[index].kv_events.empty();
      context.metrics().set_worker_state(worker.id(),
                                         {worker.healthy(), worker.in_flight(), worker.pending_prefill_tokens(),
                                          worker.recent_time_to_first_token_seconds()});
      context.metrics().set_event_stream_state(worker.id(),
                                               {events_configured, stream.connected, stream.stale, stream.silent,
                                                model.cache->index.entries_of(model.slots[index])});
    }
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
      const auto& stream = worker.event_stream();
      // From the configuration, not the stream status: the ingestion thread
      // may not have taken a new configuration in yet.
      const bool events_configured = !worker_options.kv_events.empty();
      json events = nullptr;
      if (events_configured) {
        events = {
            {"endpoint", worker_options.kv_events},
            {"replay_endpoint",
             worker_options.kv_events_replay.empty() ? json(nullptr) : json(worker_options.kv_events_replay)},
            {"connected", stream.connected.load()},
            {"last_sequence", stream.last_sequence.load() < 0 ? json(nullptr) : json(stream.last_sequence.load())},
            {"batches", stream.batches.load()},
            {"gaps", stream.gaps.load()},
            {"replays", stream.replays.load()},
            {"failed_replays", stream.failed_replays.load()},
            {"resets", stream.resets.load()},
            {"decode_errors", stream.decode_errors.load()},
            {"stale", stream.stale.load()},
            {"silent", stream.silent.load()},
            {"last_event_unix_ms",
             stream.last_event_unix_ms.load() == 0 ? json(nullptr) : json(stream.last_event_unix_ms.load())}};
      }
      json engine = nullptr;
      if (auto scraped = worker.engine_load()) {
        auto optional = [](const auto& value) { return value ? json(*value) : json(nullptr); };
        const auto& load = scraped->load;
        engine = {{"running", optional(load.running)},
                  {"waiting", optional(load.waiting)},
                  {"kv_usage", optional(load.kv_usage)},
                  {"prefix_cache_queries_tokens", optional(load.prefix_queries_tokens)},
                  {"prefix_cache_hit_tokens", optional(load.prefix_hit_tokens)},
                  {"block_size", optional(load.block_size)},
                  {"num_gpu_blocks", optional(load.num_gpu_blocks)},
                  {"scraped_unix_ms", scraped->unix_ms}};
      }
      const auto recent_ttft = worker.recent_time_to_first_token_seconds();
      workers.push_back({
          {"id", worker.id()},
          {"model", model.name},
          {"url", worker.url()},
          {"healthy", worker.healthy()},
          {"in_flight", worker.in_flight()},
          {"pending_prefill_tokens", worker.pending_prefill_tokens()},
          {"recent_ttft_ms", recent_ttft ? json(*recent_ttft * 1000) : json(nullptr)},
          {"mode", !events_configured ? "approximate"
                   : stream.stale     ? "stale"
                                      : "events"},
          {"engine", std::move(engine)},
          {"kv_events", std::move(events)},
          {"index",
           {{"blocks", model.cache->index.entries_of(model.slots[index])},
            {"engine_blocks", stream.engine_blocks.load()},
            {"assumed_blocks", stream.assumed_blocks.load()}}},
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
  auto tokenised = proxy::prompt_blocks(*model, *summary);
  if (!tokenised) {
    return error_response(tokenised.error());
  }
  const auto& prompt = *tokenised;
  auto cached = proxy::predicted_cached_tokens(*model, prompt);
  std::vector<policy::WorkerView> views;
  for (std::size_t index = 0; index < model->workers.size(); ++index) {
    views.push_back(proxy::worker_view(*model->workers[index], cached[index]));
  }
  std::optional<std::string_view> session_key;
  if (summary->session_key) {
    session_key = *summary->session_key;
  }
  auto decision = table->policy->decide({model->name, session_key, 0, {}, prompt.input_tokens, prompt.blocks}, views);
  json worker = decision.worker_index ? json(model->workers[*decision.worker_index]->id()) : json(nullptr);
  return json_response(200, {{"worker", std::move(worker)},
                             {"reason", decision.reason},
                             {"policy", table->policy->name()},
                             {"session", session_key ? json(*session_key) : json(nullptr)},
                             {"input_tokens", prompt.input_tokens == 0 ? json(nullptr) : json(prompt.input_tokens)},
                             {"tokenization", model->tokenizer ? "exact" : "approximate"},
                             {"blocks", prompt.blocks.size()},
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
