#include <charconv>
#include <nlohmann/json.hpp>

#include "kvgate/admin/admin_server.hpp"
#include "kvgate/admin/status_page.hpp"
#include "kvgate/core/clock.hpp"
#include "kvgate/openai/request.hpp"
#include "kvgate/route/explain.hpp"
#include "kvgate/route/inference_request.hpp"

namespace kvgate::admin {

using nlohmann::json;
namespace bhttp = http::bhttp;

namespace {

AdminResponse json_response(unsigned status, const json& body) {
  // Session keys and engine strings may hold bytes that are not UTF-8.
  return {status, "application/json", body.dump(-1, ' ', false, json::error_handler_t::replace)};
}

AdminResponse error_response(const openai::ApiError& error) {
  return {static_cast<unsigned>(error.status), "application/json", openai::error_body(error)};
}

// How the worker's index is fed (/debug/workers "mode", the status page):
// its events, events known incomplete, or routing history only.
std::string_view index_mode(const route::WorkerRoute& route) {
  if (route.options.kv_events.empty()) {
    return "approximate";
  }
  return route.state->event_stream().stale ? "stale" : "events";
}

AdminResponse readiness(gateway::GatewayContext& context) {
  auto table = context.table();
  json models = json::object();
  bool ready = !context.draining();
  for (const auto& model : table->models) {
    std::size_t healthy = 0;
    for (const auto& worker : model.workers) {
      healthy += worker.state->health().healthy() ? 1 : 0;
    }
    models[model.name] = {{"healthy_workers", healthy}, {"workers", model.workers.size()}};
    ready = ready && healthy > 0;
  }
  return json_response(ready ? 200 : 503,
                       {{"ready", ready}, {"draining", context.draining()}, {"models", std::move(models)}});
}

AdminResponse metrics(gateway::GatewayContext& context) {
  auto table = context.table();
  // The series of the workers in force: one that left the table left /metrics.
  std::vector<const obs::WorkerSeries*> series;
  for (const auto& model : table->models) {
    std::vector<double> speeds;
    const auto fleet = route::fleet_prices(model, true, speeds);
    for (const auto& route : model.workers) {
      const auto& worker = *route.state;
      const auto& stream = worker.event_stream();
      // What cache_aware prices the worker at (route's
      // effective_prefill_rates: by default the priors times its relative speed).
      const auto prefill = route::effective_prefill_rates(table->options->routing.cache_aware,
                                                          model.pooled_prefill->rates(), fleet, route);
      std::optional<obs::WorkerSeries::State::TtftCalibration> calibration;
      if (const auto summary = worker.costs().ttft_calibration(); summary.samples > 0) {
        calibration = {summary.samples, summary.ratio_p50, summary.ratio_p90, summary.relative_error_p50};
      }
      worker.series().set_state({worker.health().healthy(), worker.load().in_flight(),
                                 worker.load().pending_prefill_tokens(),
                                 worker.load().recent_time_to_first_token_seconds(), prefill.ms_per_token,
                                 prefill.ms_per_token_pair, prefill.base_ms, worker.costs().prefill_rates().samples,
                                 worker.breaker().ejected(monotonic_now_ms()), worker.costs().drifting(), calibration});
      worker.series().set_event_stream_state({!route.options.kv_events.empty(), stream.connected, stream.stale,
                                              stream.silent, model.cache->index.entries_of(route.slot)});
      series.push_back(&worker.series());
    }
  }
  context.session_stats().set_active(context.sessions().active(monotonic_now_ms()));
  return {200, "text/plain; version=0.0.4; charset=utf-8", context.exposition().serialize(series)};
}

// Realized over expected first tokens (null before the first sample).
json ttft_calibration_json(const workers::TtftCalibrationSummary& summary) {
  if (summary.samples == 0) {
    return nullptr;
  }
  return {{"samples", summary.samples},
          {"ratio_p50", summary.ratio_p50},
          {"ratio_p90", summary.ratio_p90},
          {"relative_error_p50", summary.relative_error_p50}};
}

// A slot engine's learned wait per request ahead of a free slot, and the
// gateway's requests there with the forecast of each slot's release (null
// for an engine modelled without slots).
// What the router sent the worker lately (routing.cache_aware.congestion_cost
// prices a placement's prefill from it).
json traffic_json(const policy::WorkerTraffic& traffic) {
  return {{"requests_per_s", traffic.arrivals_per_ms * 1000}, {"prefill_utilisation", traffic.utilisation}};
}

json slot_wait_json(const route::WorkerRoute& route, const workers::WorkerState& worker, std::uint64_t now_ms) {
  if (route.options.cache_model != config::CacheModel::sequences) {
    return nullptr;
  }
  const auto status = worker.costs().slot_wait_status();
  const auto [releases, occupancy] = route::slot_releases(route, now_ms);
  auto release_ms = json::array();
  for (std::uint32_t slot = 0; slot < releases.count; ++slot) {
    release_ms.push_back(releases.in_ms[slot]);
  }
  return {{"ms_per_request_ahead", status.ms_per_request_ahead},
          {"wait_samples", status.wait_samples},
          {"hold_samples", status.hold_samples},
          {"from", status.wait_samples == 0 && status.hold_samples == 0 ? json(nullptr)
                   : status.from_waits                                  ? json("waits")
                                                                        : json("holds")},
          {"running", occupancy.running},
          {"deferred", occupancy.waiting},
          {"mean_hold_ms", releases.count > 0 ? json(releases.mean_hold_ms) : json(nullptr)},
          {"forecast_scale", status.forecast_scale},
          {"forecast_samples", status.forecast_samples},
          {"free_level", status.free_level ? json(*status.free_level) : json(nullptr)},
          {"free_samples", status.free_samples},
          {"answer_reuse", worker.costs().answer_reuse()},
          {"answer_reuse_samples", worker.costs().answer_reuse_samples()},
          {"release_ms", std::move(release_ms)}};
}

// What the engine said of itself (null until it said).
json identity_json(const workers::WorkerState& worker) {
  const auto identity = worker.engine().identity();
  if (!identity) {
    return nullptr;
  }
  return {{"kind", config::to_string(identity->kind)},
          {"from", identity->evidence},
          {"slots", identity->slots ? json(*identity->slots) : json(nullptr)},
          {"slot_context_tokens", identity->slot_context_tokens ? json(*identity->slot_context_tokens) : json(nullptr)},
          {"build", identity->build}};
}

// Non-empty age buckets as {"from_ms": lower edge, "count": n}, youngest
// first (policy/eviction.hpp has the scale).
json idle_age_json(const policy::AgeHistogram& histogram) {
  json buckets = json::array();
  for (std::size_t bucket = 0; bucket < histogram.size(); ++bucket) {
    if (histogram[bucket] > 0) {
      buckets.push_back({{"from_ms", policy::age_bucket_low_ms(bucket)}, {"count", histogram[bucket]}});
    }
  }
  return buckets;
}

// What the eviction term knows of the model's conversations.
json returns_json(const route::SessionGaps& gaps) {
  const auto counts = gaps.counts();
  const auto model = policy::ReturnModel(counts.gaps, counts.turns, counts.sessions);
  return {{"learned", model.learned()},
          {"turns", counts.turns},
          {"sessions", counts.sessions},
          {"continuation", model.learned() ? json(model.continuation()) : json(nullptr)},
          {"gaps_by_age", idle_age_json(counts.gaps)}};
}

AdminResponse debug_workers(gateway::GatewayContext& context) {
  auto table = context.table();
  // Both clocks at one moment: durations on the monotonic one, its stamps
  // shown as Unix times.
  const auto monotonic_now = monotonic_now_ms();
  const auto unix_now = unix_now_ms();
  json workers = json::array();
  for (const auto& model : table->models) {
    std::vector<double> speeds;
    const auto fleet = route::fleet_prices(model, true, speeds);
    for (const auto& route : model.workers) {
      const auto& worker = *route.state;
      const auto& worker_options = route.options;
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
      if (auto scraped = worker.engine().last()) {
        auto optional = [](const auto& value) { return value ? json(*value) : json(nullptr); };
        const auto& load = scraped->load;
        engine = {{"running", optional(load.running)},
                  {"waiting", optional(load.waiting)},
                  {"kv_usage", optional(load.kv_usage)},
                  {"prefix_cache_queries_tokens", optional(load.prefix_queries_tokens)},
                  {"prefix_cache_hit_tokens", optional(load.prefix_hit_tokens)},
                  {"block_size", optional(load.block_size)},
                  {"num_gpu_blocks", optional(load.num_gpu_blocks)},
                  {"scraped_unix_ms", to_unix_ms(scraped->scraped_ms, monotonic_now, unix_now)}};
      }
      const auto recent_ttft = worker.load().recent_time_to_first_token_seconds();
      const auto drift = worker.costs().drift_evidence();
      const auto prefill = worker.costs().prefill_fit_status();
      const auto priced = route::effective_prefill_rates(table->options->routing.cache_aware,
                                                         model.pooled_prefill->rates(), fleet, route);
      const auto speed = worker.costs().prefill_speed_fit();
      const auto outlier = worker.breaker().status(monotonic_now);
      workers.push_back({
          {"id", worker.id()},
          {"model", model.name},
          {"url", worker.url()},
          {"role", config::to_string(route.options.role)},
          {"healthy", worker.health().healthy()},
          {"in_flight", worker.load().in_flight()},
          {"peer_in_flight", worker.load().peer_counts().in_flight},
          {"pending_prefill_tokens", worker.load().pending_prefill_tokens()},
          {"recent_ttft_ms", recent_ttft ? json(*recent_ttft * 1000) : json(nullptr)},
          {"traffic", traffic_json(worker.load().recent_traffic(monotonic_now))},
          {"ttft_calibration", ttft_calibration_json(worker.costs().ttft_calibration())},
          {"slot_wait", slot_wait_json(route, worker, monotonic_now)},
          {"mode", index_mode(route)},
          {"engine", std::move(engine)},
          {"drifting", worker.costs().drifting()},
          {"predictions",
           {{"samples", drift.samples},
            {"over_predicted", drift.over_predicted},
            {"predicted_tokens", drift.predicted_tokens},
            {"reported_tokens", drift.reported_tokens}}},
          {"outlier",
           {{"state", workers::to_string(outlier.state)},
            {"ejected_until_unix_ms", outlier.state == workers::BreakerState::open
                                          ? json(to_unix_ms(outlier.ejected_until_ms, monotonic_now, unix_now))
                                          : json(nullptr)},
            {"ejections_in_a_row", outlier.ejections_in_a_row},
            {"ejections", outlier.ejections_total},
            {"failure_streak", outlier.failure_streak},
            {"last_cause", outlier.last_cause == workers::FailureCause::none
                               ? json(nullptr)
                               : json(workers::to_string(outlier.last_cause))}}},
          {"prefill_cost",
           {{"ms_per_token", prefill.rates.ms_per_token},
            {"ms_per_token_pair", prefill.rates.ms_per_token_pair},
            {"base_ms", prefill.rates.base_ms},
            {"ms_per_active_token", prefill.rates.ms_per_active_token},
            {"ms_per_queued_token", prefill.rates.ms_per_queued_token},
            {"samples", prefill.rates.samples},
            {"clipped", prefill.clipped},
            {"residual_scale", prefill.residual_scale},
            // Against the model's pooled fit (routing.cache_aware.prefill_fit).
            {"speed", speed.speed()},
            {"speed_noise", speed.relative_noise()},
            {"speed_samples", speed.samples()},
            {"priced",
             {{"ms_per_token", priced.ms_per_token},
              {"ms_per_token_pair", priced.ms_per_token_pair},
              {"base_ms", priced.base_ms},
              {"ms_per_active_token", priced.ms_per_active_token},
              {"ms_per_queued_token", priced.ms_per_queued_token},
              {"relative_noise", priced.relative_noise},
              // Where the level came from: the engine's own prefill counters,
              // or the configured priors times the learned relative speed.
              {"level_source",
               route::to_string(route::prefill_level_source(table->options->routing.cache_aware, fleet, route))},
              {"engine_ms_per_token",
               worker.engine().prefill_ms_per_token() ? json(*worker.engine().prefill_ms_per_token()) : json(nullptr)},
              {"engine_tokens", worker.engine().prefill_level_tokens()}}}}},
          {"kv_events", std::move(events)},
          {"index",
           {{"blocks", model.cache->index.entries_of(route.slot)},
            {"engine_blocks", stream.engine_blocks.load()},
            {"assumed_blocks", stream.assumed_blocks.load()},
            // GPU blocks the engine reported freeing since the gateway started
            // (what lets a miss after them not count as drift).
            {"evicted_blocks", stream.evicted_blocks.load()},
            {"gpu_blocks", stream.gpu_blocks.load()},
            {"capacity_blocks", stream.capacity_blocks.load()},
            {"gpu_blocks_by_idle_age", idle_age_json(stream.lru_profile(monotonic_now).blocks)}}},
          {"engine_kind", config::to_string(route.options.engine)},
          {"engine_detected", identity_json(worker)},
          // Which engine keys the configuration set; the others follow the
          // engine (engine_detected) and its answers (ram_cache_observed).
          {"engine_keys_configured",
           {{"engine", route.options.given.engine},
            {"cache_model", route.options.given.cache_model},
            {"slots", route.options.given.slots},
            {"cache_ram_mib", route.options.given.cache_ram_mib}}},
          {"cache_model", config::to_string(route.options.cache_model)},
          {"slots", route.options.cache_model == config::CacheModel::sequences
                        ? json{{"total", route.options.slots},
                               {"busy", stream.slots_busy.load()},
                               {"waiting", stream.slots_waiting.load()},
                               {"kept", worker.load().slot_holds().held_for_others(0, monotonic_now_ms())}}
                        : json(nullptr)},
          {"cache_ram_mib", route.options.cache_model == config::CacheModel::sequences
                                ? json(route.options.cache_ram_mib)
                                : json(nullptr)},
          {"ram_cache_observed", worker.costs().ram_cache() ? json(*worker.costs().ram_cache()) : json(nullptr)},
      });
    }
  }
  return json_response(200, {{"policy", table->policy->name()}, {"workers", std::move(workers)}});
}

AdminResponse status_page(gateway::GatewayContext& context) {
  auto table = context.table();
  const auto now = monotonic_now_ms();
  StatusView view;
  view.version = KVGATE_VERSION;
  view.policy = std::string(table->policy->name());
  view.now_ms = now;
  view.now_unix_ms = unix_now_ms();
  view.draining = context.draining();
  for (const auto& model : table->models) {
    for (const auto& route : model.workers) {
      const auto& worker = *route.state;
      const auto& stream = worker.event_stream();
      WorkerRow row;
      row.id = worker.id();
      row.model = model.name;
      if (route.options.role != config::WorkerRole::both) {
        row.role = config::to_string(route.options.role);
      }
      row.url = worker.url();
      row.healthy = worker.health().healthy();
      row.ejected = worker.breaker().ejected(now);
      const bool events_configured = !route.options.kv_events.empty();
      row.mode = std::string(index_mode(route));
      row.events = !events_configured ? "none"
                   : stream.silent    ? "silent"
                   : stream.connected ? "connected"
                                      : "disconnected";
      row.in_flight = worker.load().in_flight();
      row.peer_in_flight = worker.load().peer_counts().in_flight;
      if (auto scraped = worker.engine().last()) {
        row.engine_waiting = scraped->load.waiting;
        row.engine_running = scraped->load.running;
        row.kv_usage = scraped->load.kv_usage;
      }
      if (auto ttft = worker.load().recent_time_to_first_token_seconds()) {
        row.recent_ttft_ms = *ttft * 1000;
      }
      if (const auto calibration = worker.costs().ttft_calibration(); calibration.samples > 0) {
        row.ttft_ratio_p50 = calibration.ratio_p50;
        row.ttft_ratio_p90 = calibration.ratio_p90;
      }
      row.index_blocks = model.cache->index.entries_of(route.slot);
      row.drifting = worker.costs().drifting();
      view.workers.push_back(std::move(row));
    }
  }
  view.hit_buckets = context.activity().hit_buckets(view.now_unix_ms);
  view.bucket_ms = context.activity().bucket_ms();
  view.recent = context.activity().recent(25);
  view.sessions = context.sessions().recent(15, now);
  if (const auto* cluster = context.cluster()) {
    view.cluster = cluster->status();
  }
  return {200, "text/html; charset=utf-8", render_status_page(view)};
}

// GET /debug/cluster: this replica, its engine and every peer it has heard.
AdminResponse debug_cluster(gateway::GatewayContext& context) {
  const auto* cluster = context.cluster();
  if (cluster == nullptr) {
    return json_response(200, {{"enabled", false}});
  }
  const auto status = cluster->status();
  const auto now = monotonic_now_ms();
  const auto unix_now = unix_now_ms();
  json peers = json::array();
  for (const auto& peer : status.peers) {
    peers.push_back({{"id", peer.id},
                     {"live", peer.live},
                     {"last_heard_unix_ms", to_unix_ms(peer.last_heard_ms, now, unix_now)},
                     {"lag_ms", peer.last_lag_ms},
                     {"applied", peer.applied},
                     {"dropped", peer.dropped},
                     {"in_flight", peer.in_flight}});
  }
  return json_response(200, {{"enabled", true},
                             {"replica_id", status.replica_id},
                             {"engine", status.engine},
                             {"stream", status.stream},
                             {"connected", status.connected},
                             {"last_applied_id", status.last_applied_id},
                             {"published", status.published},
                             {"applied", status.applied},
                             {"dropped", status.dropped},
                             {"queued", status.queued},
                             {"peers", peers}});
}

json optional_ms(double value) {
  return value < 0 ? json(nullptr) : json(value);
}

// The value of `name=` in a query string (no percent-decoding: the values
// read here are tenant names and endpoint kinds, plain ASCII).
std::string_view query_value(std::string_view query, std::string_view name) {
  while (!query.empty()) {
    auto end = query.find('&');
    auto pair = query.substr(0, end);
    if (pair.size() > name.size() && pair.starts_with(name) && pair[name.size()] == '=') {
      return pair.substr(name.size() + 1);
    }
    query = end == std::string_view::npos ? std::string_view{} : query.substr(end + 1);
  }
  return {};
}

// Dry run of the routing decision: the same preparation and the same router
// as the next real request (the sequence number it would get), nothing
// forwarded, nothing committed. The endpoint is the query's `endpoint`
// (chat_completions, completions), else the body's shape: a body with
// `prompt` and no `messages` is a completions request. `tenant=NAME` runs
// it as that tenant (its cache salt and session namespace).
AdminResponse debug_route(gateway::GatewayContext& context, std::string_view query, std::string_view body,
                          const HeaderLookup& header) {
  std::optional<openai::Endpoint> endpoint;
  if (query.find("endpoint=completions") != std::string_view::npos) {
    endpoint = openai::Endpoint::completions;
  } else if (query.find("endpoint=chat_completions") != std::string_view::npos) {
    endpoint = openai::Endpoint::chat_completions;
  } else if (query.find("endpoint=") != std::string_view::npos) {
    return error_response(
        openai::invalid_request("endpoint must be chat_completions or completions", "endpoint", "invalid_value"));
  } else {
    auto parsed = json::parse(body, nullptr, false);
    endpoint = parsed.is_object() && parsed.contains("prompt") && !parsed.contains("messages")
                   ? openai::Endpoint::completions
                   : openai::Endpoint::chat_completions;
  }
  // Routing-time inserts reach the index through the ingestion thread; the
  // next request decides after them, so the dry run waits for them too.
  if (auto* writer = context.index_writer()) {
    writer->settle(std::chrono::milliseconds(200));
  }
  auto table = context.table();
  const tenant::Tenant* tenant = &table->tenants->anonymous();
  if (auto name = query_value(query, "tenant"); !name.empty()) {
    tenant = table->tenants->find(name);
    if (tenant == nullptr) {
      return error_response(
          openai::invalid_request("no tenant is named '" + std::string(name) + "'", "tenant", "invalid_value"));
    }
  }
  const auto& sources = table->options->sessions.key_from;
  const openai::SessionKeyInput keys{sources, openai::session_header_values(sources, header)};
  auto prepared = route::prepare_inference(*table, body, *endpoint, keys, *tenant, local_now());
  if (!prepared) {
    return error_response(prepared.error().error);
  }
  const auto& inference = *prepared;
  const auto& model = *inference.model;
  route::RouteContext route_context{inference.session_key(),
                                    context.peek_decision_sequence(),
                                    {},
                                    monotonic_now_ms(),
                                    inference.summary.session_key_source};
  auto decision = context.router().decide(*table, model, &inference.prompt, route_context);
  if (query_value(query, "format") == "text") {
    return {200, "text/plain; charset=utf-8", route::explain_text(model, decision)};
  }
  auto worker_id = [&](const std::optional<std::size_t>& index) {
    return index ? json(model.workers[*index].state->id()) : json(nullptr);
  };
  json session = nullptr;
  json session_state = nullptr;
  if (inference.session_key()) {
    session = *inference.session_key();
    session_state = {{"key_source", inference.summary.session_key_source},
                     {"previous_worker", decision.session ? json(decision.session->worker) : json(nullptr)},
                     {"turns", decision.session ? decision.session->turns : 0},
                     {"expired", decision.session && decision.session->expired}};
  }
  return json_response(
      200,
      {{"worker", worker_id(decision.worker)},
       {"reason", policy::to_string(decision.reason)},
       {"policy_reason", policy::to_string(decision.policy_reason)},
       {"policy", table->policy->name()},
       {"session", std::move(session)},
       {"session_state", std::move(session_state)},
       {"input_tokens", decision.input_tokens == 0 ? json(nullptr) : json(decision.input_tokens)},
       {"predicted_cached_tokens", decision.worker ? json(decision.indexed_cached_tokens) : json(nullptr)},
       {"best_cached_tokens", decision.worker ? json(decision.best_cached_tokens) : json(nullptr)},
       {"work_price", optional_ms(decision.work_price)},
       {"full_attention_cached_tokens", decision.worker ? json(decision.full_attention_cached_tokens) : json(nullptr)},
       {"attention", model.cache ? prefix::to_string(model.cache->attention.effective()) : "full"},
       {"kv_bytes_per_token", model.kv_bytes_per_token},
       {"runner_up", worker_id(decision.runner_up)},
       {"gap_ms", optional_ms(decision.gap_ms)},
       {"prefill", route::prefill_json(decision)},
       {"tokenization", model.tokenizer ? "exact" : "approximate"},
       {"blocks", inference.prompt.blocks.size()},
       {"returns", returns_json(*model.session_gaps)},
       {"candidates", route::candidates_json(decision.candidates)}});
}

// %XX escapes in a path segment (a session key may hold any byte).
std::optional<std::string> percent_decode(std::string_view text) {
  std::string decoded;
  decoded.reserve(text.size());
  for (std::size_t at = 0; at < text.size(); ++at) {
    if (text[at] != '%') {
      decoded.push_back(text[at]);
      continue;
    }
    if (at + 2 >= text.size()) {
      return std::nullopt;
    }
    auto hex = [](char c) -> int {
      if (c >= '0' && c <= '9') return c - '0';
      if (c >= 'a' && c <= 'f') return c - 'a' + 10;
      if (c >= 'A' && c <= 'F') return c - 'A' + 10;
      return -1;
    };
    const int high = hex(text[at + 1]);
    const int low = hex(text[at + 2]);
    if (high < 0 || low < 0) {
      return std::nullopt;
    }
    decoded.push_back(static_cast<char>(high * 16 + low));
    at += 2;
  }
  return decoded;
}

// One turn as the seed's practical test logs it: worker, input tokens,
// predicted and engine-reported cached tokens, prefill (TTFT) and decode
// time, and the worker's KV usage when it was chosen.
json turn_json(const route::SessionTurn& turn, std::uint64_t now, std::uint64_t unix_now) {
  auto optional_count = [](const std::optional<std::uint32_t>& value) { return value ? json(*value) : json(nullptr); };
  auto optional_number = [](const std::optional<double>& value) { return value ? json(*value) : json(nullptr); };
  return {{"turn", turn.number},
          {"unix_ms", to_unix_ms(turn.at_ms, now, unix_now)},
          {"worker", turn.worker},
          {"reason", policy::to_string(turn.reason)},
          {"prefill", turn.prefill ? json(policy::to_string(*turn.prefill)) : json(nullptr)},
          {"prefill_worker", turn.prefill_worker.empty() ? json(nullptr) : json(turn.prefill_worker)},
          {"input_tokens", turn.input_tokens},
          {"predicted_cached_tokens", turn.predicted_cached_tokens},
          {"cached_tokens", optional_count(turn.cached_tokens)},
          {"prompt_tokens", optional_count(turn.prompt_tokens)},
          {"ttft_ms", optional_number(turn.ttft_ms)},
          {"decode_ms", optional_number(turn.decode_ms)},
          {"kv_usage", optional_number(turn.kv_usage)},
          {"status", turn.status == 0 ? json(nullptr) : json(turn.status)}};
}

// GET /debug/sessions?limit=N: the sessions seen most recently (at most
// kMaxListedSessions, whatever the table holds), each with its last turn.
constexpr std::size_t kMaxListedSessions = 200;

AdminResponse debug_sessions(gateway::GatewayContext& context, std::string_view query) {
  std::size_t limit = 20;
  if (auto text = query_value(query, "limit"); !text.empty()) {
    std::size_t parsed = 0;
    const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), parsed);
    if (error != std::errc{} || end != text.data() + text.size() || parsed == 0) {
      return error_response(openai::invalid_request("limit must be a positive integer", "limit", "invalid_value"));
    }
    limit = std::min(parsed, kMaxListedSessions);
  }
  const auto now = monotonic_now_ms();
  const auto unix_now = unix_now_ms();
  json sessions = json::array();
  for (const auto& summary : context.sessions().recent(limit, now)) {
    sessions.push_back(
        {{"key", summary.key},
         {"key_source", summary.key_source.empty() ? json(nullptr) : json(summary.key_source)},
         {"parent", summary.parent.empty() ? json(nullptr) : json(summary.parent)},
         {"worker", summary.state.worker},
         {"turns_total", summary.state.turns},
         {"started_unix_ms", to_unix_ms(summary.started_ms, now, unix_now)},
         {"last_seen_unix_ms", to_unix_ms(summary.state.last_seen_ms, now, unix_now)},
         {"last_turn", summary.last_turn ? turn_json(*summary.last_turn, now, unix_now) : json(nullptr)}});
  }
  return json_response(200, {{"active", context.sessions().active(now)},
                             {"stored", context.sessions().size()},
                             {"sessions", std::move(sessions)}});
}

AdminResponse debug_session(gateway::GatewayContext& context, std::string_view encoded_key) {
  auto key = percent_decode(encoded_key);
  if (!key || key->empty()) {
    return error_response(openai::invalid_request("The session key in the path is empty or badly escaped.", "key",
                                                  "invalid_session_key"));
  }
  const auto now = monotonic_now_ms();
  const auto unix_now = unix_now_ms();
  auto found = context.sessions().detail(*key, now);
  if (!found) {
    // The key is not echoed: it is the client's, and may be anything.
    auto error = openai::not_found("/debug/sessions/<key>");
    error.message = "No session with this key (never seen, or evicted from the session table).";
    error.code = "session_not_found";
    return error_response(error);
  }
  const auto& detail = *found;
  json turns = json::array();
  for (const auto& turn : detail.turns) {
    turns.push_back(turn_json(turn, now, unix_now));
  }
  return json_response(
      200,
      {{"key", detail.key},
       {"key_source", detail.key_source.empty() ? json(nullptr) : json(detail.key_source)},
       {"parent", detail.parent.empty() ? json(nullptr) : json(detail.parent)},
       {"children", detail.children},
       {"worker", detail.state.worker},
       {"turns_total", detail.state.turns},
       {"started_unix_ms", to_unix_ms(detail.started_ms, now, unix_now)},
       {"last_seen_unix_ms", to_unix_ms(detail.state.last_seen_ms, now, unix_now)},
       {"expired", detail.state.expired},
       {"last_answer_tokens", detail.state.last_answer_tokens ? json(*detail.state.last_answer_tokens) : json(nullptr)},
       {"last_answered_unix_ms", detail.state.last_answered_ms
                                     ? json(to_unix_ms(*detail.state.last_answered_ms, now, unix_now))
                                     : json(nullptr)},
       {"turns", std::move(turns)}});
}

}  // namespace

AdminResponse handle_admin_request(gateway::GatewayContext& context, bhttp::verb method, std::string_view target,
                                   std::string_view body, const HeaderLookup& header) {
  const auto query_at = target.find('?');
  const auto path = target.substr(0, query_at);
  const auto query = query_at == std::string_view::npos ? std::string_view() : target.substr(query_at + 1);
  const bool get = method == bhttp::verb::get;
  if ((path == "/" || path == "/status") && get) {
    return status_page(context);
  }
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
    return debug_route(context, query, body, header);
  }
  if (path == "/debug/sessions" && get) {
    return debug_sessions(context, query);
  }
  if (path == "/debug/cluster" && get) {
    return debug_cluster(context);
  }
  constexpr std::string_view kSessions = "/debug/sessions/";
  if (path.starts_with(kSessions)) {
    if (!get) {
      return error_response(openai::method_not_allowed(std::string(bhttp::to_string(method)), "/debug/sessions/"));
    }
    return debug_session(context, path.substr(kSessions.size()));
  }
  for (std::string_view known : {"/", "/status", "/healthz", "/readyz", "/metrics", "/debug/workers", "/debug/route",
                                 "/debug/sessions", "/debug/cluster"}) {
    if (path == known) {
      return error_response(openai::method_not_allowed(std::string(bhttp::to_string(method)), path));
    }
  }
  return error_response(openai::not_found(path));
}

}  // namespace kvgate::admin
