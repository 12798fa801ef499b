#include "kvgate/route/routing_table.hpp"

#include <spdlog/spdlog.h>

#include "kvgate/openai/request.hpp"
#include "kvgate/route/outlier_filter.hpp"

namespace kvgate::route {

std::size_t ModelRoute::find_worker(std::string_view id, std::size_t hint) const {
  if (hint < workers.size() && workers[hint].state->id() == id) {
    return hint;
  }
  for (std::size_t index = 0; index < workers.size(); ++index) {
    if (workers[index].state->id() == id) {
      return index;
    }
  }
  return workers.size();
}

const ModelRoute* RoutingTable::find_model(std::string_view name) const {
  for (const auto& model : models) {
    if (model.name == name) {
      return &model;
    }
  }
  return nullptr;
}

RoutingTable::Served RoutingTable::find_served(std::string_view name,
                                               const std::optional<std::string>& lora_path) const {
  auto adapter_of = [](const ModelRoute& model, std::string_view adapter) -> Served {
    for (std::size_t index = 0; index < model.adapters.size(); ++index) {
      if (model.adapters[index] == adapter) {
        return {&model, index};
      }
    }
    return {};
  };
  if (const auto* model = find_model(name)) {
    if (lora_path) {
      return adapter_of(*model, *lora_path);  // an adapter the model does not list is not the base model
    }
    return {model, std::nullopt};
  }
  if (const auto colon = name.rfind(':'); colon != std::string_view::npos && !lora_path) {
    if (const auto* model = find_model(name.substr(0, colon))) {
      return adapter_of(*model, name.substr(colon + 1));
    }
  }
  for (const auto& model : models) {
    for (std::size_t adapter = 0; adapter < model.adapters.size(); ++adapter) {
      if (model.adapters[adapter] == name) {
        return {&model, adapter};
      }
    }
  }
  return {};
}

std::vector<std::shared_ptr<workers::WorkerState>> RoutingTable::all_workers() const {
  std::vector<std::shared_ptr<workers::WorkerState>> result;
  for (const auto& model : models) {
    for (const auto& worker : model.workers) {
      result.push_back(worker.state);
    }
  }
  return result;
}

std::unique_ptr<policy::Policy> make_policy(const config::RoutingOptions& routing) {
  switch (routing.policy) {
    case config::PolicyKind::round_robin:
      return policy::make_round_robin();
    case config::PolicyKind::least_load:
      return policy::make_least_load();
    case config::PolicyKind::session_hash:
      return policy::make_session_hash();
    case config::PolicyKind::prefix_hash:
      return policy::make_prefix_hash(routing.prefix_hash_blocks);
    case config::PolicyKind::dynamo_cost:
      return policy::make_dynamo_cost({routing.dynamo_overlap_weight});
    case config::PolicyKind::sglang_cache_aware:
      return policy::make_sglang_cache_aware(
          {routing.sglang_cache_threshold, routing.sglang_balance_abs_threshold, routing.sglang_balance_rel_threshold});
    case config::PolicyKind::cache_aware: {
      const auto& cost = routing.cache_aware;
      policy::CostModel model;
      model.queue_ms_per_request = cost.queue_ms_per_request;
      model.queue_ms_per_waiting_request = cost.queue_ms_per_waiting_request;
      model.engine_snapshot_max_age_ms = cost.engine_metrics_max_age.count();
      model.own_prefill_weight = cost.own_prefill_weight;
      if (cost.soft_margin) {
        model.soft_margin_ms = static_cast<double>(cost.soft_margin->count());
      }
      model.load_bound_epsilon = cost.load_bound_epsilon;
      model.eviction_term = cost.eviction_term;
      model.move_margin = cost.move_margin;
      model.congestion_cost = cost.congestion_cost;
      return policy::make_cache_aware(model);
    }
  }
  return policy::make_least_load();
}

policy::PrefillRates prefill_priors(const config::CacheAwareOptions& options) {
  // The queue's per-token cost starts at the prefill's.
  return {options.prefill_ms_per_token,        options.prefill_ms_per_token_pair, options.prefill_base_ms, 0,
          options.prefill_ms_per_active_token, options.prefill_ms_per_token};
}

namespace {
// The median of `values` (reordered); `empty` when there are none.
double median_of(std::vector<double>& values, double empty) {
  if (values.empty()) {
    return empty;
  }
  const auto middle = values.begin() + static_cast<std::ptrdiff_t>(values.size() / 2);
  std::nth_element(values.begin(), middle, values.end());
  if (values.size() % 2 == 1) {
    return *middle;
  }
  return (*middle + *std::max_element(values.begin(), middle)) / 2;
}
}  // namespace

double median_prefill_speed(const ModelRoute& model, std::vector<double>& buffer) {
  buffer.clear();
  for (const auto& worker : model.workers) {
    buffer.push_back(worker.state->costs().prefill_speed());
  }
  return median_of(buffer, 1);
}

FleetPrices fleet_prices(const ModelRoute& model, bool relative_speed, std::vector<double>& buffer) {
  FleetPrices fleet;
  if (relative_speed) {
    fleet.median_speed = median_prefill_speed(model, buffer);
  }
  buffer.clear();
  for (const auto& worker : model.workers) {
    if (const auto level = worker.state->costs().slot_free_level(); level && slot_count(worker.options) > 0) {
      buffer.push_back(*level);
    }
  }
  fleet.median_free_level = median_of(buffer, 0);
  fleet.free_answers = model.slot_free_answers->load(std::memory_order_relaxed);
  return fleet;
}

std::uint32_t slot_count(const config::WorkerOptions& options) {
  return options.cache_model == config::CacheModel::sequences ? options.slots : 0;
}

SlotReleasesRead slot_releases(const WorkerRoute& route, std::uint64_t now_ms) {
  const auto& worker = *route.state;
  std::array<double, policy::SlotWaitFit::kWindow> holds{};
  const auto hold_count = worker.costs().slot_holds(holds);
  std::array<double, policy::SlotReleases::kMaxSlots> held{};
  SlotReleasesRead read;
  read.occupancy = worker.load().slot_occupancy().read(now_ms, held);
  read.releases = policy::forecast_releases(std::span<const double>(holds.data(), hold_count),
                                            std::span<const double>(held.data(), read.occupancy.running),
                                            slot_count(route.options));
  read.releases.scale = worker.costs().slot_forecast_scale();
  return read;
}

std::uint32_t held_slot_count(const config::AdmissionOptions& options, const WorkerRoute& worker) {
  return options.hold_slots && worker.options.cache_ram_mib == 0 ? slot_count(worker.options) : 0;
}

std::optional<ModelRoom> model_room(const ModelRoute& model, const config::AdmissionOptions& options,
                                    std::uint64_t hold_key, std::uint64_t now_ms) {
  // In panic mode (none in routing) every worker counts, as the router
  // then picks among all of them.
  const bool panic = std::none_of(model.workers.begin(), model.workers.end(),
                                  [&](const WorkerRoute& worker) { return in_routing(worker, now_ms); });
  ModelRoom room;
  for (const auto& worker : model.workers) {
    const auto& state = *worker.state;
    if (!panic && !in_routing(worker, now_ms)) {
      continue;
    }
    const std::uint32_t slots = held_slot_count(options, worker);
    const std::uint32_t limit = options.max_in_flight_per_worker;
    if (slots == 0 && limit == 0) {
      return std::nullopt;
    }
    room.capacity += slots > 0 && limit > 0 ? std::min(slots, limit) : std::max(slots, limit);
    if (slots > 0) {
      room.kept += state.load().slot_holds().held_for_others(hold_key, now_ms);
    }
  }
  return room;
}

bool slot_kept_for(const ModelRoute& model, std::uint64_t hold_key, std::uint64_t now_ms) {
  return std::any_of(model.workers.begin(), model.workers.end(), [&](const WorkerRoute& worker) {
    return worker.state->load().slot_holds().kept_for(hold_key, now_ms);
  });
}

std::optional<std::uint64_t> next_hold_end(const ModelRoute& model, std::uint64_t now_ms) {
  std::optional<std::uint64_t> first;
  for (const auto& worker : model.workers) {
    if (const auto end = worker.state->load().slot_holds().next_end(now_ms); end && (!first || *end < *first)) {
      first = end;
    }
  }
  return first;
}

namespace {
policy::FreeLevelFreshness freshness_of(const FleetPrices& fleet, const workers::WorkerState& worker) {
  return {worker.costs().slot_free_mark(), fleet.free_answers, fleet.median_free_level};
}
}  // namespace

policy::PrefillRates effective_prefill_rates(const config::CacheAwareOptions& options,
                                             const policy::PrefillRates& pooled, const FleetPrices& fleet,
                                             const WorkerRoute& route) {
  const auto& worker = *route.state;
  const double median_speed = fleet.median_speed;
  if (const auto level = worker.costs().slot_free_level(); level && slot_count(route.options) > 0) {
    // What a free slot's first token takes there now, at the priors' shape
    // (the level is learned against the priors themselves).
    auto priced = prefill_priors(options).scaled(policy::priced_free_level(*level, freshness_of(fleet, worker)));
    priced.samples = worker.costs().prefill_rates().samples;
    priced.relative_noise = worker.costs().prefill_speed_noise();
    return priced;
  }
  switch (options.prefill_fit) {
    case config::PrefillFitScope::per_worker:
      return worker.costs().prefill_rates();
    case config::PrefillFitScope::pooled:
      return pooled.scaled(worker.costs().prefill_speed());
    case config::PrefillFitScope::relative:
      break;
  }
  auto priors = prefill_priors(options);
  priors.samples = worker.costs().prefill_rates().samples;
  priors.relative_noise = worker.costs().prefill_speed_noise();
  if (const auto level = worker.engine().prefill_ms_per_token(); level && priors.ms_per_token > 0) {
    // The engine's own clock sets the level, this worker's speed included:
    // every per-token price scales with it; the fixed part stays.
    const double factor = *level / priors.ms_per_token;
    const double base_ms = priors.base_ms;
    priors = priors.scaled(factor);
    priors.base_ms = base_ms;
    return priors;
  }
  // The priors' shape and level; what is learned is only how the workers
  // differ, which is what a fit confounded by queueing still measures (its
  // bias is common to every worker and cancels in the ratio).
  return priors.scaled(median_speed > 0 ? worker.costs().prefill_speed() / median_speed : 1.0);
}

std::string_view to_string(PrefillLevelSource source) {
  switch (source) {
    case PrefillLevelSource::engine_counters:
      return "engine_counters";
    case PrefillLevelSource::priors_times_speed:
      return "priors_times_speed";
    case PrefillLevelSource::pooled_fit:
      return "pooled_fit";
    case PrefillLevelSource::own_fit:
      return "own_fit";
    case PrefillLevelSource::free_slot_answers:
      return "free_slot_answers";
    case PrefillLevelSource::fleet_free_level:
      return "fleet_free_level";
  }
  return "priors_times_speed";
}

PrefillLevelSource prefill_level_source(const config::CacheAwareOptions& options, const FleetPrices& fleet,
                                        const WorkerRoute& route) {
  const auto& worker = *route.state;
  if (const auto level = worker.costs().slot_free_level(); level && slot_count(route.options) > 0) {
    return policy::priced_free_level(*level, freshness_of(fleet, worker)) < *level
               ? PrefillLevelSource::fleet_free_level
               : PrefillLevelSource::free_slot_answers;
  }
  switch (options.prefill_fit) {
    case config::PrefillFitScope::per_worker:
      return PrefillLevelSource::own_fit;
    case config::PrefillFitScope::pooled:
      return PrefillLevelSource::pooled_fit;
    case config::PrefillFitScope::relative:
      break;
  }
  return worker.engine().prefill_ms_per_token() ? PrefillLevelSource::engine_counters
                                                : PrefillLevelSource::priors_times_speed;
}

namespace {

Result<std::shared_ptr<const prompt::ModelTokenizer>, std::string> reuse_or_load_tokenizer(
    const std::string& folder, const RoutingTable* previous) {
  if (folder.empty()) return std::shared_ptr<const prompt::ModelTokenizer>();
  if (previous != nullptr) {
    for (const auto& model : previous->models) {
      if (model.tokenizer && model.tokenizer->folder == folder) return model.tokenizer;
    }
  }
  auto loaded = prompt::load_model_tokenizer(folder);
  if (loaded && (*loaded)->kv_shape) {
    spdlog::info("tokenizer {}: {} KV bytes per token from config.json ({}), where kv_bytes_per_token is not set",
                 folder, (*loaded)->kv_shape->bytes_per_token, (*loaded)->kv_shape->derivation);
  } else if (loaded && !(*loaded)->kv_shape_error.empty()) {
    spdlog::warn(
        "tokenizer {}: {}: KV bytes per token not known from the model; models[].kv_bytes_per_token or {} "
        "prices KV moves",
        folder, (*loaded)->kv_shape_error, config::kDefaultKvBytesPerToken);
  }
  if (loaded && !(*loaded)->chat_template) {
    spdlog::warn(
        "tokenizer {}: no chat template (neither chat_template.jinja nor tokenizer_config.json's chat_template): "
        "chat requests to its models route without prefix data; text completions are tokenised exactly",
        folder);
  }
  return loaded;
}

}  // namespace

Result<std::shared_ptr<const RoutingTable>, std::string> build_routing_table(
    std::shared_ptr<const config::Options> options, const RoutingTable* previous, long created_unix_seconds,
    kv_events::CacheRegistry& registry) {
  auto table = std::make_shared<RoutingTable>();
  table->options = options;
  table->policy = make_policy(options->routing);
  const auto& health = options->health_check;
  // Traffic failures eject through each worker's circuit breaker, which
  // closes again by itself (a half-open probe): independent of active checks.
  table->thresholds = {health.unhealthy_threshold, health.healthy_threshold};
  const auto& outlier = options->outlier_detection;
  table->ejection = {outlier.consecutive_failures, static_cast<std::uint64_t>(outlier.base_ejection_time.count()),
                     static_cast<std::uint64_t>(outlier.max_ejection_time.count())};
  std::vector<std::shared_ptr<workers::WorkerState>> old_workers;
  if (previous != nullptr) {
    old_workers = previous->all_workers();
  }
  std::vector<std::shared_ptr<const prompt::ModelTokenizer>> tokenizers;
  for (const auto& model_options : options->models) {
    auto loaded = reuse_or_load_tokenizer(model_options.tokenizer, previous);
    if (!loaded) {
      return unexpected("model " + model_options.name + ": tokenizer " + loaded.error());
    }
    tokenizers.push_back(std::move(*loaded));
  }
  // Last, because it cannot be undone by the caller: after this nothing fails.
  auto assignments = registry.assign(options->models, options->index);
  if (!assignments) {
    return unexpected(assignments.error());
  }
  std::vector<openai::ListedModel> names;
  const auto& cost = options->routing.cache_aware;
  policy::PrefillFitOptions prefill_prior;
  prefill_prior.prior = prefill_priors(cost);
  for (std::size_t model_index = 0; model_index < options->models.size(); ++model_index) {
    const auto& model_options = options->models[model_index];
    const auto& assignment = (*assignments)[model_index];
    ModelRoute model{model_options.name,           model_options.block_size, {},
                     model_options.adapters,       assignment.cache,         tokenizers[model_index],
                     model_options.cache_isolation};
    model.stand_in_tokenizer = model_options.stand_in_tokenizer;
    // Configured, else the model's own (its config.json), else the default.
    const auto* tokenizer = tokenizers[model_index].get();
    model.kv_bytes_per_token = model_options.kv_bytes_per_token.value_or(tokenizer != nullptr && tokenizer->kv_shape
                                                                             ? tokenizer->kv_shape->bytes_per_token
                                                                             : config::kDefaultKvBytesPerToken);
    // GB/s is 1e6 bytes per millisecond.
    model.ms_per_offloaded_token = model.kv_bytes_per_token / (model_options.offload_gbps * 1e6);
    for (const auto& adapter : model_options.adapters) {
      model.adapter_hashes.push_back(workers::adapter_hash(adapter));
    }
    if (const auto& pd = model_options.disaggregation) {
      model.disaggregation = ModelRoute::Disaggregation{pd->protocol, pd->local_prefill_tokens, pd->local_prefill_ratio,
                                                        model.kv_bytes_per_token / (pd->transfer_gbps * 1e6)};
    }
    model.max_loras = model_options.max_loras;
    model.lora_load_ms = static_cast<double>(model_options.lora_load.count());
    model.streams_carry_timings =
        !model_options.workers.empty() &&
        std::all_of(model_options.workers.begin(), model_options.workers.end(),
                    [](const config::WorkerOptions& worker) { return worker.engine == config::EngineKind::llamacpp; });
    if (const auto* old = previous != nullptr ? previous->find_model(model.name) : nullptr) {
      model.session_gaps = old->session_gaps;
      model.pooled_prefill = old->pooled_prefill;
      model.slot_free_answers = old->slot_free_answers;
      model.adapter_load = old->adapter_load;
      model.transfer = old->transfer;
    }
    model.pooled_prefill->set_prior(prefill_prior);
    for (std::size_t index = 0; index < model_options.workers.size(); ++index) {
      const auto& worker = model_options.workers[index];
      std::shared_ptr<workers::WorkerState> state;
      for (const auto& old : old_workers) {
        if (old->id() == worker.id && old->url() == worker.url) {
          state = old;
        }
      }
      if (!state) {
        state = std::make_shared<workers::WorkerState>(worker.id, worker.url, worker.endpoint, model.name);
      }
      state->costs().set_prefill_prior(prefill_prior);
      model.workers.push_back({std::move(state), assignment.slots[index], worker});
    }
    names.push_back({model.name, {}});
    for (const auto& adapter : model_options.adapters) {
      names.push_back({adapter, model.name});
    }
    table->models.push_back(std::move(model));
  }
  table->models_body = openai::models_list(names, created_unix_seconds);
  table->tenants = std::make_shared<const tenant::Directory>(*options);
  return std::shared_ptr<const RoutingTable>(std::move(table));
}

namespace {

// llama-server's --cache-ram (MiB) in the model's blocks.
std::uint64_t slot_ram_blocks(const ModelRoute& model, const config::WorkerOptions& worker) {
  if (worker.cache_model != config::CacheModel::sequences || worker.cache_ram_mib == 0) {
    return 0;
  }
  const double block_bytes = model.kv_bytes_per_token * model.block_size;
  return static_cast<std::uint64_t>(static_cast<double>(worker.cache_ram_mib) * 1024 * 1024 / block_bytes);
}

}  // namespace

std::vector<kv_events::WorkerFeed> worker_feeds(const RoutingTable& table) {
  std::vector<kv_events::WorkerFeed> feeds;
  for (const auto& model : table.models) {
    for (const auto& worker : model.workers) {
      std::vector<std::string> listener_addresses;
      if (worker.options.kv_events == kv_events::kListenerEndpoint) {
        const auto& authority = worker.options.endpoint.authority;
        listener_addresses = {authority.to_string(), authority.host};
      }
      feeds.push_back({worker.state, model.cache, worker.slot, worker.options.kv_events, std::move(listener_addresses),
                       worker.options.kv_events_replay, worker.options.kv_capacity_blocks,
                       table.options->index.default_kv_capacity_blocks,
                       worker.options.cache_model == config::CacheModel::sequences ? worker.options.slots : 0,
                       worker.options.slot_similarity, slot_ram_blocks(model, worker.options), model.adapters});
    }
  }
  return feeds;
}

std::vector<workers::ScrapeTarget> scrape_targets(const RoutingTable& table) {
  std::vector<workers::ScrapeTarget> targets;
  const auto& defaults = table.options->metrics_scrape;
  for (std::size_t index = 0; index < table.models.size(); ++index) {
    const auto& model = table.models[index];
    // The table's models are the options' models, in order.
    const bool discover = index < table.options->models.size() && table.options->models[index].discover_adapters;
    for (const auto& worker : model.workers) {
      targets.push_back({worker.state, worker.options.scrape_interval.value_or(defaults.interval),
                         worker.options.scrape_timeout.value_or(defaults.timeout),
                         discover ? model.name : std::string()});
    }
  }
  return targets;
}

}  // namespace kvgate::route
