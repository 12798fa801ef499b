#pragma once
// The routing-policy seam. A policy is pure: it gets the request's routing
// context and an immutable view of the model's workers, and returns a
// Decision that explains itself. It never touches sockets, clocks or shared
// state, so the same inputs always give the same decision (tests and the
// /debug/route dry run rely on this).
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "kvgate/policy/congestion.hpp"
#include "kvgate/policy/eviction.hpp"
#include "kvgate/policy/kv_demand.hpp"
#include "kvgate/policy/prefill_rates.hpp"
#include "kvgate/policy/reason.hpp"
#include "kvgate/policy/slot_wait.hpp"
#include "kvgate/policy/work_price.hpp"

namespace kvgate::policy {

// One worker as the policy sees it, built by the router from live state.
struct WorkerView {
  std::string_view id;
  bool healthy = true;
  std::uint32_t in_flight = 0;  // requests the gateway dispatched and has not finished
  // Prompt tokens dispatched here whose prefill has not started answering
  // yet: the load the engine's own metrics cannot show yet.
  std::uint64_t pending_prefill_tokens = 0;
  // Leading prompt tokens the prefix index says this worker holds, already
  // capped as the engine caps a hit (never the last prompt token); 0 when
  // the router stopped crediting the worker's index (drifting).
  std::uint32_t cached_tokens = 0;
  // On a hybrid-attention model, what the full-attention group alone
  // covers (the peers' re-implementations read this: their routers drop the
  // local group). Unset: the same as cached_tokens.
  std::optional<std::uint32_t> full_attention_cached_tokens;
  // Age of the engine snapshot engine_waiting_others comes from, in ms;
  // negative: never scraped. Policies ignore a snapshot older than their
  // configured bound (an engine that stopped answering scrapes is judged by
  // the gateway's own counts only).
  std::int64_t engine_snapshot_age_ms = -1;
  // Uncached prompt tokens of a typical request dispatched here (0:
  // unknown): prices the waiting requests that are not this gateway's.
  double mean_uncached_tokens = 0;
  // Of the requests the engine itself reports waiting (its last scrape),
  // those beyond this gateway's own pending ones at the scrape: load that
  // other gateways and clients put there, which kvgate's own counts miss.
  std::uint32_t engine_waiting_others = 0;
  // The worker's predictions persistently disagree with what its engine
  // reports (route/README.md): its index entries are not credited.
  bool drifting = false;
  // Prompt tokens of the requests in flight here: their KV blocks while they
  // decode (Dynamo's "active blocks" load signal, in tokens).
  std::uint64_t active_tokens = 0;
  // Of in_flight, the requests that have not had their first token: the
  // ones waiting for prefill (work_price.hpp counts them).
  std::uint32_t pending_requests = 0;
  // Blocks the prefix index credits to this worker (SGLang's "tree size").
  std::uint64_t indexed_blocks = 0;
  // What a prefill costs on this worker: learned from its completed
  // requests, the configured priors before that (prefill_rates.hpp).
  PrefillRates prefill;
  // Out of routing for a while after consecutive traffic failures
  // (workers/outlier_ejection.hpp); the router clears it for every worker
  // when all healthy ones are ejected, so a failing fleet keeps serving.
  bool ejected = false;
  // In flight at admission.max_in_flight_per_worker: takes nothing new. The
  // router clears it for every worker when all routable ones are at it
  // (the admission queue keeps that rare; a request never fails for it).
  bool at_capacity = false;
  // Its GPU blocks by idle age, how many it holds and can hold (the index
  // writer's last summary): what a placement here would evict.
  LruProfile lru;
  // Of cached_tokens, the ones beyond its GPU run: held only in a lower tier
  // (CPU, disk), which the engine loads instead of computing.
  std::uint32_t offloaded_cached_tokens = 0;
  // The request's LoRA adapter here (base: a base-model request).
  AdapterState adapter = AdapterState::base;
  // A disaggregated fleet's roles (config: workers[].role): a prefill
  // worker never decodes (every policy skips it), and only it prefills for
  // a decoder (policy/disaggregation.hpp).
  bool decodes = true;
  bool prefills_for_others = false;
  // An engine that runs at most this many requests at once (llama-server's
  // slots; 0: continuous batching, no such limit modelled), and what each
  // request ahead of a free slot delays a new one there, in ms (learned
  // from its outcomes: slot_wait.hpp; 0 before anything is learned).
  std::uint32_t slots = 0;
  double ms_per_request_ahead = 0;
  // When each of its busy slots is expected to free (slot_wait.hpp; count
  // 0: no forecast, the figure per request ahead stands).
  SlotReleases slot_releases;
  // How far this worker's expected TTFTs have been from what its clients
  // got: the median |realized - expected| / realized of its recent answers
  // (workers/ttft_calibration.hpp); 0 until there are enough of them.
  double ttft_relative_error = 0;
  // The requests and priced prefill this gateway recently sent it, per ms
  // (congestion.hpp; zero before any dispatch).
  WorkerTraffic traffic;
};

// Requests that must release a slot before a new one starts on `worker`:
// those in flight beyond its slots, plus one (0: a slot is free, or the
// engine has no slot limit). `others` are requests the engine reports
// waiting that are not this gateway's.
inline std::uint32_t requests_ahead_of_slot(const WorkerView& worker, std::uint32_t others) {
  const auto load = worker.in_flight + others;
  return worker.slots > 0 && load >= worker.slots ? load - worker.slots + 1 : 0;
}

struct RouteRequest {
  std::string_view model;
  std::optional<std::string_view> session_key;
  // A number the shell increments per decision; policies that rotate use it
  // instead of hidden mutable state.
  std::uint64_t sequence = 0;
  // Indices into the worker span already tried for this request (retries).
  std::span<const std::size_t> excluded;
  // Prompt length in tokens; 0 when kvgate could not tokenise the prompt.
  std::uint32_t input_tokens = 0;
  // The prompt's leading block hashes (kvgate's chained hash; empty when the
  // prompt is shorter than a block or could not be tokenised).
  std::span<const std::uint64_t> prompt_blocks;
  // What breaks exact ties between equally good workers: a hash of the
  // session key, else the prompt's first block, so that several gateways in
  // front of one fleet, seeing the same engine state, pick the same worker
  // for the same request. Without either, ties rotate by `sequence`.
  std::optional<std::uint64_t> tie_break;

  // The model's block size in tokens (the index's unit).
  std::uint32_t block_size = 16;
  // Loading one token's KV from a lower tier (block bytes over the tier's
  // bandwidth, per model); 0: offloaded tokens are priced as GPU hits.
  double ms_per_offloaded_token = 0;
  // Loading the request's LoRA adapter on a worker that does not hold it
  // (models[].lora_load_ms, the engine's figure when learned); 0: free.
  double adapter_load_ms = 0;
  // How likely an idle conversation returns (learned per model from the
  // sessions' gaps); null: no eviction term.
  const ReturnModel* returns = nullptr;
  // The session's previous turn, when it has one and its worker is still in
  // the fleet: that worker holds this prompt's head, idle that long, which
  // the placement reuses, not evicts. The worker is named by its position
  // in the span `decide` gets (the caller resolved the id once, so scoring
  // a thousand workers compares indices, not id strings).
  struct PreviousTurn {
    std::size_t worker_index = 0;
    double idle_ms = 0;
  };
  std::optional<PreviousTurn> previous_turn;

  [[nodiscard]] std::uint64_t tie_order() const { return tie_break.value_or(sequence); }
};

// One worker's line in a decision. Trivially copyable: the worker id views
// the WorkerState's string, which the routing-table snapshot keeps alive as
// long as anything holding the decision does.
struct Candidate {
  std::string_view worker;
  bool eligible = false;
  Ineligible ineligible_because = Ineligible::none;
  bool drifting = false;  // cached tokens not credited (WorkerView::drifting)
  std::uint32_t in_flight = 0;
  std::uint32_t cached_tokens = 0;
  // cache_aware, the session's previous worker: of cached_tokens, those the
  // requests already dispatched there are expected to evict before this
  // one's turn (policy/eviction.hpp, surviving_blocks); priced as uncached.
  std::uint32_t at_risk_tokens = 0;
  // The cost model's parts (cache_aware); negative: not computed.
  double queue_delay_ms = -1;
  double prefill_ms = -1;
  // A slot engine with every slot busy: the requests ahead of a free slot
  // and the wait they cost, which is then the whole queue_delay_ms (0: a
  // slot is free, or no wait is learned yet).
  std::uint32_t requests_ahead = 0;
  double slot_wait_ms = 0;
  // Of slot_wait_ms, the forecast of the slots' releases before the
  // worker's learned correction (0: not forecast).
  double slot_forecast_ms = 0;
  // Loading the prompt's offloaded part back (cache_aware; in the expected
  // TTFT); negative: not computed.
  double receive_ms = -1;
  std::uint32_t offloaded_cached_tokens = 0;
  double expected_ttft_ms = -1;
  double score = 0;  // lower is better; policy-specific
  // cache_aware: how far the score may be off by the worker's learned
  // rates' noise (PrefillRates::relative_noise), in ms; and the blocks the
  // index credits the worker (its share of the fleet's KV memory).
  double score_noise_ms = 0;
  std::uint64_t indexed_blocks = 0;
  // cache_aware's eviction term: the expected re-prefill of what placing
  // the request here evicts (in the score, not in expected_ttft_ms), and
  // how many blocks it evicts; negative: not computed.
  double evicts_ms = -1;
  std::uint64_t evicted_blocks = 0;
  // cache_aware's KV demand (kv_demand.hpp): the prompt tokens in flight
  // there plus this one's beyond the worker's memory (their share of the
  // cached prefix is in at_risk_tokens), and the re-prefill of the waiting
  // requests' idle prefixes the placement evicts (in the score, not in
  // expected_ttft_ms); negative: not computed.
  std::uint64_t kv_excess_tokens = 0;
  double displaced_ms = -1;
  // cache_aware with congestion_cost: what this placement's prefill delays
  // the fleet's next requests (congestion.hpp; in the score, not in
  // expected_ttft_ms); negative: not computed.
  double congestion_ms = -1;
  // The request's adapter there and what loading it costs (cache_aware: in
  // the expected TTFT; an adapter it evicts is charged one more load in the
  // score, the evicted adapter's next request's); negative: not computed.
  AdapterState adapter = AdapterState::base;
  double adapter_load_ms = -1;
};

struct Decision {
  std::optional<std::size_t> worker_index;  // empty: nothing eligible
  Reason reason = Reason::no_eligible_worker;
  // cache_aware: what one ms of work counted in every candidate's score
  // (CostModel::own_prefill_weight; negative: not a cost-based decision).
  double work_price = -1;
  std::vector<Candidate> candidates;  // one per worker, in the span's order
};

class Policy {
 public:
  virtual ~Policy() = default;
  [[nodiscard]] virtual std::string_view name() const = 0;
  [[nodiscard]] virtual Decision decide(const RouteRequest& request, std::span<const WorkerView> workers) const = 0;
};

// Expected time to first token (cache_aware): the queue in front of the
// request on a worker plus the prefill it still has to do there, both
// priced with that worker's PrefillRates (learned per worker; WorkerView).
// Prompt tokens dispatched ahead are prefilled first (FCFS chunked
// prefill), so they cost the worker's per-token rate. A request that is
// already decoding does not make a new one wait for it (continuous batching
// admits the newcomer at the next step); it only makes each step a little
// longer, hence the small per-request term, which also spreads new sessions
// over idle workers.
struct CostModel {
  double queue_ms_per_request = 0.5;  // each request in flight
  // Each request the engine reports waiting: it was not admitted yet (batch
  // or KV limits), so its whole prefill is ahead; ~200 prompt tokens.
  double queue_ms_per_waiting_request = 5;
  // Engine snapshots older than this are ignored (several missed scrapes at
  // the default 1 s interval).
  std::int64_t engine_snapshot_max_age_ms = 5'000;
  // What one ms of work (the request's prefill and the re-prefill of what
  // it evicts) counts in the score, against the queue's one (not in the
  // expected TTFT shown). Unset: the fleet's price of work
  // (work_price.hpp), 1 on an idle fleet and growing with the requests
  // waiting per worker. Set: that fixed weight (1 is a pure expected-TTFT
  // comparison).
  std::optional<double> own_prefill_weight;
  // Optional soft load bound (off when empty): a worker whose queue exceeds
  // (1 + load_bound_epsilon) x the fleet's mean queue (plus this request's
  // prefill) is left for the best worker within the bound, unless that one
  // is more than soft_margin_ms worse. The study found a hard bound worse in
  // every configuration and a soft one harmless: it exists for operators
  // who want one.
  std::optional<double> soft_margin_ms;
  double load_bound_epsilon = 0.25;
  // Adds each worker's expected re-prefill of what the placement evicts
  // (eviction.hpp) to its score.
  bool eviction_term = true;
  // A session's turn leaves its previous worker only when the gain beats
  // both workers' calibrated TTFT error (WorkerView::ttft_relative_error).
  // Off by default: on the WEKA replay (bench/load/trace.sh weka70) it kept
  // turns that a move would have served sooner, at a lower hit rate.
  bool move_margin = false;
  // Adds what each placement's prefill delays the requests that come after
  // it (congestion.hpp: at the fleet's mean queue and recent traffic; grows
  // with the fleet's utilisation and with the square of the work) to its
  // score.
  bool congestion_cost = false;
};

std::unique_ptr<Policy> make_round_robin();
std::unique_ptr<Policy> make_least_load();
// Plain sticky sessions, the baseline cache-aware routing is measured
// against: the session key picks a worker by rendezvous hashing.
std::unique_ptr<Policy> make_session_hash();
// Prompt-prefix affinity without any index: the hash of the first
// `prefix_blocks` blocks picks a worker by rendezvous hashing.
std::unique_ptr<Policy> make_prefix_hash(std::uint32_t prefix_blocks);
std::unique_ptr<Policy> make_cache_aware(CostModel cost);

// Peers behind the same interface, so that "better than the alternatives"
// is measured (README.md in this folder gives their sources and defaults).
//
// Dynamo's KV router (ai-dynamo/dynamo, lib/llm/src/kv_router): the
// worker with the lowest logit
//   overlap_weight x (prefill still to compute there: the request's uncached
//                     part plus the prompts dispatched and not yet answered)
//   + decode load (the prompts of the requests in flight there)
// with temperature 0 (deterministic argmin). Block counts there, tokens here:
// the same argmin.
struct DynamoCostOptions {
  double overlap_weight = 1.0;
};
std::unique_ptr<Policy> make_dynamo_cost(DynamoCostOptions options);

// SGLang's router (sgl-project/sglang, sgl-router, policy cache_aware):
// when the fleet is imbalanced (max - min in-flight > balance_abs_threshold
// and max > balance_rel_threshold x min) the least loaded worker; else the
// worker holding the longest prefix if that covers more than
// cache_threshold of the prompt; else the worker holding the least. Its
// own approximate tree of routed text is replaced by kvgate's index (events
// plus routing history), which only makes the peer better informed.
struct SglangCacheAwareOptions {
  double cache_threshold = 0.3;
  std::uint32_t balance_abs_threshold = 64;
  double balance_rel_threshold = 1.5;
};
std::unique_ptr<Policy> make_sglang_cache_aware(SglangCacheAwareOptions options);

// The least_load decision (fewest requests in flight, ties rotate) with the
// given reason; also the fallback of the hashing policies for requests
// without a key.
Decision decide_least_load(const RouteRequest& request, std::span<const WorkerView> workers, Reason reason);

// Shared first stage of every policy: one Candidate per worker, eligible when
// healthy and not yet tried for this request. The only allocation of a
// decision (one vector); scoring and picking allocate nothing.
std::vector<Candidate> filter_candidates(const RouteRequest& request, std::span<const WorkerView> workers);

// Why the worker at `index` cannot take this request (Ineligible::none: it
// can). `to_decode`: it would decode it, which a prefill-only worker cannot.
Ineligible ineligibility(const RouteRequest& request, const WorkerView& worker, std::size_t index, bool to_decode);

// Shared last stage: the eligible candidate that `better(a, b)` ranks first.
// Candidates are visited from a start that rotates with the sequence number
// and ties keep the first visited, so equal workers share the load instead
// of the first one taking every tie.
struct Pick {
  std::optional<std::size_t> index;
  std::size_t eligible = 0;
};
// The reason of a cost policy's pick: nothing eligible, one candidate left,
// or the cheapest with or without part of the prompt cached there.
Reason cost_pick_reason(const Pick& pick, const std::vector<Candidate>& candidates);

template <class Better>
Pick pick_best(const std::vector<Candidate>& candidates, std::uint64_t sequence, Better better) {
  Pick pick;
  const auto count = candidates.size();
  for (std::size_t offset = 0; offset < count; ++offset) {
    auto index = static_cast<std::size_t>((sequence + offset) % count);
    if (!candidates[index].eligible) {
      continue;
    }
    ++pick.eligible;
    if (!pick.index || better(candidates[index], candidates[*pick.index])) {
      pick.index = index;
    }
  }
  return pick;
}

}  // namespace kvgate::policy
