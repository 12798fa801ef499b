#pragma once
// The immutable snapshot the request path reads: options, models, their
// workers, and the policy. A reload builds a new table and publishes it
// atomically; requests in flight keep the table they started with
// (shared_ptr), so nothing is torn mid-request.
#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kvgate/config/options.hpp"
#include "kvgate/core/result.hpp"
#include "kvgate/kv_events/model_cache.hpp"
#include "kvgate/kv_events/worker_feed.hpp"
#include "kvgate/policy/disaggregation.hpp"
#include "kvgate/policy/policy.hpp"
#include "kvgate/prompt/model_tokenizer.hpp"
#include "kvgate/prompt/prepared_prompt.hpp"
#include "kvgate/route/session_gaps.hpp"
#include "kvgate/tenant/directory.hpp"
#include "kvgate/workers/learned_adapter_load.hpp"
#include "kvgate/workers/learned_transfer.hpp"
#include "kvgate/workers/scrape_target.hpp"
#include "kvgate/workers/worker_state.hpp"

namespace kvgate::route {

// One worker of a model: its live state (shared by every table that keeps
// the worker, so health, load and drift survive reloads), its slot in the
// model's prefix index and its configuration.
struct WorkerRoute {
  std::shared_ptr<workers::WorkerState> state;
  index::WorkerSlot slot = 0;
  config::WorkerOptions options;
};

struct ModelRoute {
  std::string name;
  std::uint32_t block_size = 16;
  std::vector<WorkerRoute> workers;
  // LoRA adapters its workers serve (config: models[].adapters); a request
  // naming one routes here in the adapter's own cache partition.
  std::vector<std::string> adapters;
  std::shared_ptr<kv_events::ModelCache> cache;             // the model's prefix index
  std::shared_ptr<const prompt::ModelTokenizer> tokenizer;  // null: the stand-in below
  config::CacheIsolation cache_isolation = config::CacheIsolation::none;
  prompt::StandInTokenizer stand_in_tokenizer = prompt::StandInTokenizer::kvgate;
  // Loading one token's KV from a lower tier (config: kv_bytes_per_token
  // over offload_gbps).
  double ms_per_offloaded_token = 0;
  // Configured, else the model's config.json, else the default: prices
  // offloaded prefixes and PD transfers, sizes a llama.cpp RAM cache in blocks.
  double kv_bytes_per_token = config::kDefaultKvBytesPerToken;
  // Every worker is a llama.cpp server, whose streams end with `timings`
  // (the prompt's computed and cached tokens) whether or not usage was
  // asked for: kvgate need not add stream_options.include_usage, and the
  // client gets the engine's stream unchanged.
  bool streams_carry_timings = false;
  // The prefill cost learned from every worker's requests (kept across
  // reloads while the model is); each worker's speed scales it.
  std::shared_ptr<workers::LearnedPrefill> pooled_prefill = std::make_shared<workers::LearnedPrefill>();
  // Its sessions' inter-turn gaps (kept across reloads while the model is).
  std::shared_ptr<SessionGaps> session_gaps = std::make_shared<SessionGaps>();
  // How many free-slot answers its slot workers have taught (every
  // replica's, in a cluster; kept across reloads while the model is): the
  // clock a worker's free-slot level is fresh or stale by
  // (policy::FreeLevelFreshness).
  std::shared_ptr<std::atomic<std::uint64_t>> slot_free_answers = std::make_shared<std::atomic<std::uint64_t>>(0);

  // Per adapter (same order): workers::adapter_hash of its name; the LoRA
  // slots a worker has when its engine does not report them
  // (models[].max_loras) and an adapter's load time (models[].lora_load).
  std::vector<std::uint64_t> adapter_hashes;
  std::uint32_t max_loras = 1;
  double lora_load_ms = 100;  // the prior: adapter_load learns the real figure
  // An adapter's load time as its requests' first tokens show it (kept
  // across reloads while the model is).
  std::shared_ptr<workers::LearnedAdapterLoad> adapter_load = std::make_shared<workers::LearnedAdapterLoad>();

  // A disaggregated model (models[].disaggregation): how the phases reach
  // the engines, when the decoder prefills itself, and the KV link's prior
  // (ms per token: kv_bytes_per_token over transfer_gbps), which
  // `transfer` replaces once requests have shown the real hand-over.
  struct Disaggregation {
    config::DisaggregationProtocol protocol = config::DisaggregationProtocol::vllm;
    std::uint32_t local_prefill_tokens = 512;
    double local_prefill_ratio = 1;
    double transfer_ms_per_token_prior = 0;
  };
  std::optional<Disaggregation> disaggregation;
  std::shared_ptr<workers::LearnedTransfer> transfer = std::make_shared<workers::LearnedTransfer>();

  // `adapter`: its position in `adapters` (nullopt: the base model).
  [[nodiscard]] prompt::PromptModel prompt_model(std::optional<std::size_t> adapter = std::nullopt) const {
    return {name,
            adapter ? std::string_view(adapters[*adapter]) : std::string_view(),
            adapter,
            block_size,
            tokenizer.get(),
            stand_in_tokenizer};
  }
  // Index of the worker with this id; workers.size() when there is none.
  // `hint`: where it was last seen (one compare when it is still there, a
  // scan of the ids when a reload or discovery moved it).
  [[nodiscard]] std::size_t find_worker(std::string_view id, std::size_t hint = SIZE_MAX) const;
};

struct RoutingTable {
  std::shared_ptr<const config::Options> options;
  std::vector<ModelRoute> models;
  std::shared_ptr<const policy::Policy> policy;
  workers::HealthThresholds thresholds;
  workers::EjectionOptions ejection;
  std::string models_body;  // GET /v1/models, rendered once
  std::shared_ptr<const tenant::Directory> tenants = std::make_shared<const tenant::Directory>();

  [[nodiscard]] const ModelRoute* find_model(std::string_view name) const;
  // What a request's "model" selects: a model, or a LoRA adapter (`adapter`
  // set, viewing the configuration) on its base model. model null: neither.
  struct Served {
    const ModelRoute* model = nullptr;
    std::optional<std::size_t> adapter;  // its position in model->adapters
  };
  // `lora_path` (SGLang's request field) names an adapter of the model
  // `name`; SGLang's "base:adapter" form of `name` does too.
  [[nodiscard]] Served find_served(std::string_view name,
                                   const std::optional<std::string>& lora_path = std::nullopt) const;
  // Every worker once, in configuration order.
  [[nodiscard]] std::vector<std::shared_ptr<workers::WorkerState>> all_workers() const;
};

std::unique_ptr<policy::Policy> make_policy(const config::RoutingOptions& routing);

// The configured prefill-cost priors (routing.cache_aware), in one place.
policy::PrefillRates prefill_priors(const config::CacheAwareOptions& options);

// The median of the model's workers' learned prefill speeds; `buffer` is
// the caller's (reused, so a decision does not allocate).
double median_prefill_speed(const ModelRoute& model, std::vector<double>& buffer);

// What pricing any worker of a model reads of the whole model, once per
// decision (effective_prefill_rates).
struct FleetPrices {
  double median_speed = 1;         // median_prefill_speed (1: not read)
  double median_free_level = 0;    // of the slot workers' learned free-slot levels; 0: none learned
  std::uint64_t free_answers = 0;  // *ModelRoute::slot_free_answers
};
// `relative_speed`: read the median speed too (prefill_fit: relative).
// `buffer` as for median_prefill_speed.
FleetPrices fleet_prices(const ModelRoute& model, bool relative_speed, std::vector<double>& buffer);

// The slots of a worker modelled as llama-server's (configured, or from
// its /props); 0: an engine that batches continuously.
std::uint32_t slot_count(const config::WorkerOptions& options);

// When each busy slot of a slot engine frees (policy/slot_wait.hpp), from
// the requests this gateway has in flight there (workers::SlotOccupancy)
// and the worker's recent holds, with its learned correction; and the
// occupancy read. No forecast (count 0) for an engine without slots.
struct SlotReleasesRead {
  policy::SlotReleases releases;
  workers::SlotOccupancy::Snapshot occupancy;
};
SlotReleasesRead slot_releases(const WorkerRoute& worker, std::uint64_t now_ms);

// The slots admission.hold_slots keeps on `worker` (0: none): a slot
// engine's, where it is modelled without a RAM prompt cache. With one,
// llama-server saves a taken slot's history and restores it at the
// conversation's next turn, so there is little to keep, and a turn
// waiting in kvgate's queue would go to whichever replica frees a slot
// first rather than where its history is.
std::uint32_t held_slot_count(const config::AdmissionOptions& options, const WorkerRoute& worker);

// How many requests to `model` the admission gate lets in at once: over its
// routable workers (all of them when none is), each worker's
// max_in_flight_per_worker, or with admission.hold_slots a slot engine's
// slots (held_slot_count) (the smaller of the two when both apply); and of those, the slots
// kept for other sessions' next turns than `hold_key`'s (0: every kept
// slot counts). Nullopt: no limit (a routable worker has none).
struct ModelRoom {
  std::uint64_t capacity = 0;
  std::uint64_t kept = 0;
};
[[nodiscard]] std::optional<ModelRoom> model_room(const ModelRoute& model, const config::AdmissionOptions& options,
                                                  std::uint64_t hold_key, std::uint64_t now_ms);
// Whether a slot of `model` is kept for `hold_key`'s session's next turn.
[[nodiscard]] bool slot_kept_for(const ModelRoute& model, std::uint64_t hold_key, std::uint64_t now_ms);
// When the first slot kept for a session's turn on `model` ends (nullopt:
// none is kept).
[[nodiscard]] std::optional<std::uint64_t> next_hold_end(const ModelRoute& model, std::uint64_t now_ms);

// Where effective_prefill_rates took a worker's level from, for
// /debug/workers.
enum class PrefillLevelSource : std::uint8_t {
  engine_counters,
  priors_times_speed,
  pooled_fit,
  own_fit,
  free_slot_answers,
  fleet_free_level  // its own free-slot level is stale and above the fleet's median
};
std::string_view to_string(PrefillLevelSource source);
PrefillLevelSource prefill_level_source(const config::CacheAwareOptions& options, const FleetPrices& fleet,
                                        const WorkerRoute& worker);

// What a worker's prefill costs as cache_aware prices it
// (routing.cache_aware.prefill_fit): by default (relative) the priors'
// shape at the level the engine's own prefill counters show
// (workers/engine_prefill_level.hpp), or, until they have shown enough or
// when the engine exports none, the priors times its speed over the
// median; the model's pooled fit times its speed; or its own fit. A slot
// engine, once its free-slot answers show a level (policy/slot_wait.hpp's
// free_level), is priced at the priors' shape at that level, whatever the
// scope, or at most at the fleet's median level while its own is stale
// (policy::priced_free_level). `pooled` (model.pooled_prefill->rates())
// and `fleet` are read once per decision by the caller.
policy::PrefillRates effective_prefill_rates(const config::CacheAwareOptions& options,
                                             const policy::PrefillRates& pooled, const FleetPrices& fleet,
                                             const WorkerRoute& worker);

// Reuses the WorkerState of `previous` for every worker whose id and URL are
// unchanged, so health, in-flight counts and drift survive a reload; indexes
// and worker slots come from the registry (kept across reloads). Tokenizers
// are loaded from their folders, or reused from `previous` when a model's
// folder is unchanged; all of them load before anything else changes, so a
// reload with a broken tokenizer is rejected whole.
Result<std::shared_ptr<const RoutingTable>, std::string> build_routing_table(
    std::shared_ptr<const config::Options> options, const RoutingTable* previous, long created_unix_seconds,
    kv_events::CacheRegistry& registry);

// What the ingestion thread follows for this table.
// What the metrics scraper watches: each worker with its own schedule.
std::vector<workers::ScrapeTarget> scrape_targets(const RoutingTable& table);
std::vector<kv_events::WorkerFeed> worker_feeds(const RoutingTable& table);

}  // namespace kvgate::route
