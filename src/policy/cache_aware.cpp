#include <algorithm>
#include <cmath>

#include "kvgate/policy/policy.hpp"

namespace kvgate::policy {
namespace {

// Sends the request where its expected time to first token is lowest, each
// worker priced with its own PrefillRates (learned from its requests):
//   prefill       = a (L - cached) + b (L^2 - cached^2) / 2 + c, cached
//                   less, on the session's previous worker, what the
//                   requests dispatched there first are expected to evict
//                   of its idle prefix (at_risk_tokens, eviction.hpp)
//   receive       = offloaded cached tokens x the tier's load time per token
//                   (cached counts every tier: a lower tier's blocks are
//                   loaded, not computed)
//   others        = engine_waiting_others: the engine's waiting requests
//                   beyond this gateway's pending ones at the scrape (other
//                   gateways' and clients' requests)
//   queue_delay   = q * (pending_prefill_tokens + others * mean_uncached_tokens)
//                 + others * queue_ms_per_waiting_request
//                 + d * active_tokens + in_flight * queue_ms_per_request
//   slot engine   = with every slot busy, the queue is the wait for one
//                   (slot_wait.hpp; slot_wait_ms): the release the request
//                   waits for, each slot freeing when its request's hold,
//                   given how long it has held it, is expected to end, and
//                   each request ahead taking the first freed slot for a
//                   mean hold; times the worker's learned correction
//                   (the median realized/forecast of recent waits). Before
//                   any hold is known, the requests ahead
//                   x the worker's learned wait per request ahead. A slot
//                   frees only when its request has decoded to the end,
//                   which no per-token price covers; until either is
//                   learned, the queue above stands
//   adapter       = the LoRA adapter's load when the worker does not hold it
//                   (loadable, waiting: one load; evicts: one load in the
//                   TTFT, and a second in the score for the adapter it
//                   displaces, whose next request reloads it)
//   expected_ttft = queue_delay + prefill + receive + adapter
//   kv demand     = beyond the worker's memory, the prompts in flight there
//                   and this one take the idle blocks while they wait: the
//                   cached prefix as far as the excess reaches is priced as
//                   uncached (at_risk_tokens), and the rest of what this
//                   one adds evicts the waiting requests' prefixes
//                   (displaced: their re-prefill; kv_demand.hpp)
//   evicts        = expected re-prefill of the blocks the placement evicts
//                   on a full worker, each weighted by the chance its owner
//                   returns before it would age out anyway (eviction.hpp)
//   congestion    = with congestion_cost, what the prefill delays the
//                   requests that come after it before the backlog drains,
//                   at the fleet's mean queue and traffic (congestion.hpp)
//   work_price    = what one ms of work costs the fleet (work_price.hpp):
//                   1 + the requests waiting for a first token per
//                   eligible worker, or own_prefill_weight when set
//   score         = queue_delay + work_price * (prefill + evicts + displaced) + receive
//                   + adapter (+ one more load when it evicts) + congestion
// With move_margin, a session's turn leaves its previous worker only when
// the cheapest worker's score beats it by more than the two expectations' learned error
// (each worker's median |realized - expected| / realized times its expected
// TTFT, combined in quadrature): a move the calibration cannot tell from
// noise loses the conversation's cache for its later turns (within_margin).
// A worker that holds the conversation's earlier turns wins while its
// saving outweighs its queue; when it is busy enough, another worker's
// shorter queue wins even though it must prefill everything (affinity is
// broken when it stops paying). A slower worker (learned rates) gets
// proportionally less. Ties (equal hits, scores within the rates' learned
// noise) go to the worker holding fewer index blocks, then the one with
// fewer requests in flight, then rotate (pick_best).
class CacheAware final : public Policy {
 public:
  explicit CacheAware(CostModel cost) : cost_(cost) {}

  [[nodiscard]] std::string_view name() const override { return "cache_aware"; }

  [[nodiscard]] Decision decide(const RouteRequest& request, std::span<const WorkerView> workers) const override {
    Decision decision;
    decision.candidates = filter_candidates(request, workers);
    decision.work_price = cost_.own_prefill_weight.value_or(waiting_work_price(workers, decision.candidates));
    for (std::size_t index = 0; index < workers.size(); ++index) {
      score(request, workers[index], index, decision.work_price, decision.candidates[index]);
    }
    if (cost_.congestion_cost) {
      add_congestion(workers, decision.candidates);
    }
    auto pick = pick_best(decision.candidates, request.tie_order(), better);
    decision.worker_index = pick.index;
    decision.reason = cost_pick_reason(pick, decision.candidates);
    if (cost_.soft_margin_ms && pick.index && pick.eligible > 1) {
      apply_soft_bound(request, decision);
    }
    if (cost_.move_margin) {
      keep_within_margin(request, workers, decision);
    }
    return decision;
  }

 private:
  // The fleet's price of work (work_price.hpp): the requests without a
  // first token on the eligible workers, this gateway's own and, from a
  // fresh engine snapshot, the ones other gateways and clients sent.
  [[nodiscard]] double waiting_work_price(std::span<const WorkerView> workers,
                                          std::span<const Candidate> candidates) const {
    double waiting = 0;
    std::size_t eligible = 0;
    for (std::size_t index = 0; index < workers.size(); ++index) {
      if (!candidates[index].eligible) {
        continue;
      }
      ++eligible;
      const auto& worker = workers[index];
      waiting += static_cast<double>(worker.pending_requests);
      if (engine_fresh(worker)) {
        waiting += static_cast<double>(worker.engine_waiting_others);
      }
    }
    return fleet_work_price(waiting, eligible);
  }

  [[nodiscard]] bool engine_fresh(const WorkerView& worker) const {
    return worker.engine_snapshot_age_ms >= 0 && worker.engine_snapshot_age_ms <= cost_.engine_snapshot_max_age_ms;
  }

  void score(const RouteRequest& request, const WorkerView& worker, std::size_t index, double work_price,
             Candidate& candidate) const {
    auto cached = std::min(worker.cached_tokens, request.input_tokens);
    candidate.cached_tokens = cached;
    candidate.offloaded_cached_tokens = std::min(worker.offloaded_cached_tokens, cached);
    candidate.at_risk_tokens = at_risk_tokens(request, worker, index, candidate);
    if (cost_.eviction_term && worker.slots == 0 && request.block_size > 0 && worker.lru.capacity_blocks > 0) {
      price_kv_demand(request, worker, candidate);
    }
    candidate.prefill_ms = worker.prefill.prefill_ms(request.input_tokens, cached - candidate.at_risk_tokens);
    const bool engine_fresh = this->engine_fresh(worker);
    // The engine's waiting requests beyond this gateway's own pending ones
    // (counted when the scrape was taken, so a stale snapshot does not turn
    // requests answered since into phantom load) were sent by other
    // gateways or clients: each is priced as a typical request here. This
    // gateway's own are priced by their tokens, and not counted twice.
    const double others = engine_fresh ? static_cast<double>(worker.engine_waiting_others) : 0.0;
    const auto others_tokens = static_cast<std::uint64_t>(others * worker.mean_uncached_tokens);
    candidate.queue_delay_ms =
        worker.prefill.queue_ms(worker.pending_prefill_tokens + others_tokens, worker.active_tokens) +
        static_cast<double>(worker.in_flight) * cost_.queue_ms_per_request +
        others * cost_.queue_ms_per_waiting_request;
    candidate.requests_ahead = requests_ahead_of_slot(worker, engine_fresh ? worker.engine_waiting_others : 0);
    if (candidate.requests_ahead > 0 && worker.slot_releases.count > 0) {
      candidate.slot_forecast_ms = wait_for_slot_ms(worker.slot_releases, candidate.requests_ahead);
      candidate.slot_wait_ms = candidate.slot_forecast_ms * worker.slot_releases.scale;
      candidate.queue_delay_ms = candidate.slot_wait_ms;
    } else if (candidate.requests_ahead > 0 && worker.ms_per_request_ahead > 0) {
      candidate.slot_wait_ms = static_cast<double>(candidate.requests_ahead) * worker.ms_per_request_ahead;
      candidate.queue_delay_ms = candidate.slot_wait_ms;
    }
    candidate.receive_ms = static_cast<double>(candidate.offloaded_cached_tokens) * request.ms_per_offloaded_token;
    candidate.adapter = worker.adapter;
    const bool loads = worker.adapter == AdapterState::loadable || worker.adapter == AdapterState::evicts ||
                       worker.adapter == AdapterState::waiting;
    candidate.adapter_load_ms = loads ? request.adapter_load_ms : 0.0;
    candidate.expected_ttft_ms =
        candidate.queue_delay_ms + candidate.prefill_ms + candidate.receive_ms + candidate.adapter_load_ms;
    candidate.score = candidate.queue_delay_ms + work_price * candidate.prefill_ms + candidate.receive_ms +
                      candidate.adapter_load_ms +
                      (worker.adapter == AdapterState::evicts ? request.adapter_load_ms : 0.0);
    if (cost_.eviction_term && request.returns != nullptr && request.block_size > 0) {
      price_evictions(request, worker, index, candidate);
      candidate.score += work_price * candidate.evicts_ms;
    }
    if (candidate.displaced_ms > 0) {
      candidate.score += work_price * candidate.displaced_ms;
    }
    candidate.score_noise_ms = candidate.score * worker.prefill.relative_noise;
  }

  // On the session's previous worker, its prefix has been idle since the
  // previous turn: the requests dispatched there before this one store
  // their blocks first and may evict its tail (eviction.hpp). Elsewhere
  // the prefix's age is not known (a shared head is usually in use), and
  // nothing is taken off.
  static std::uint32_t at_risk_tokens(const RouteRequest& request, const WorkerView& worker, std::size_t index,
                                      const Candidate& candidate) {
    if (!request.previous_turn || request.previous_turn->worker_index != index || request.block_size == 0) {
      return 0;
    }
    const std::uint64_t block_size = request.block_size;
    const std::uint64_t gpu_blocks = (candidate.cached_tokens - candidate.offloaded_cached_tokens) / block_size;
    const auto surviving = surviving_blocks(worker.lru, gpu_blocks, request.previous_turn->idle_ms);
    return static_cast<std::uint32_t>((gpu_blocks - surviving) * block_size);
  }

  // Beyond the worker's memory, the prompts in flight there and this one
  // take the idle blocks while they wait (kv_demand.hpp): the prompt's own
  // cached prefix first, then the waiting requests' prefixes, each
  // re-computed at this worker's per-token price with attention to a
  // context as long as this prompt (as evicted blocks are priced).
  static void price_kv_demand(const RouteRequest& request, const WorkerView& worker, Candidate& candidate) {
    const auto capacity_tokens = worker.lru.capacity_blocks * request.block_size;
    const auto gpu_cached = candidate.cached_tokens - candidate.offloaded_cached_tokens;
    const auto demand = kv_demand(capacity_tokens, worker.active_tokens, request.input_tokens, gpu_cached);
    candidate.kv_excess_tokens = demand.excess_tokens;
    candidate.at_risk_tokens = std::max(candidate.at_risk_tokens, demand.own_lost_tokens);
    const double ms_per_token =
        worker.prefill.ms_per_token + worker.prefill.ms_per_token_pair * static_cast<double>(request.input_tokens);
    candidate.displaced_ms = static_cast<double>(demand.displaced_tokens) * ms_per_token;
  }

  // The placement stores the prompt's full blocks the worker lacks on the
  // GPU (vLLM caches full blocks only; offloaded ones are loaded into new
  // GPU blocks). An evicted block's re-prefill is priced at
  // this worker's rates with each token attending to a context as long as
  // this prompt: the engines free a request's blocks tail first, so LRU
  // eviction starts with the deep blocks of conversations like this one.
  static void price_evictions(const RouteRequest& request, const WorkerView& worker, std::size_t index,
                              Candidate& candidate) {
    const std::uint64_t block_size = request.block_size;
    const std::uint64_t full_blocks = full_prompt_blocks(request.input_tokens, block_size);
    const std::uint64_t own_blocks =
        (candidate.cached_tokens - candidate.offloaded_cached_tokens - candidate.at_risk_tokens) / block_size;
    const auto new_blocks = full_blocks > own_blocks ? full_blocks - own_blocks : 0;
    const double ms_per_block =
        static_cast<double>(block_size) *
        (worker.prefill.ms_per_token + worker.prefill.ms_per_token_pair * static_cast<double>(request.input_tokens));
    std::optional<double> own_idle_ms;
    if (request.previous_turn && request.previous_turn->worker_index == index) {
      own_idle_ms = request.previous_turn->idle_ms;
    }
    const auto evicted = eviction_cost(worker.lru, new_blocks, own_blocks, own_idle_ms, *request.returns, ms_per_block);
    candidate.evicts_ms = evicted.ms;
    candidate.evicted_blocks = evicted.blocks;
  }

  // Every eligible worker is priced at the fleet's mean traffic and queue
  // (congestion.hpp): work placed anywhere delays the requests the router
  // balances over the fleet, so only the work itself differs.
  static void add_congestion(std::span<const WorkerView> workers, std::vector<Candidate>& candidates) {
    WorkerTraffic fleet;
    double backlog = 0;
    std::size_t eligible = 0;
    for (std::size_t index = 0; index < workers.size(); ++index) {
      if (!candidates[index].eligible) {
        continue;
      }
      ++eligible;
      fleet.arrivals_per_ms += workers[index].traffic.arrivals_per_ms;
      fleet.utilisation += workers[index].traffic.utilisation;
      backlog += candidates[index].queue_delay_ms;
    }
    if (eligible == 0) {
      return;
    }
    const auto count = static_cast<double>(eligible);
    fleet.arrivals_per_ms /= count;
    fleet.utilisation /= count;
    backlog /= count;
    for (auto& candidate : candidates) {
      if (candidate.eligible) {
        candidate.congestion_ms = policy::congestion_ms(candidate.prefill_ms, backlog, fleet);
        candidate.score += candidate.congestion_ms;
      }
    }
  }

  // The soft bound (routing-study.md, "bounded load"): a worker is within
  // it when its queue plus this request's prefill there stays under
  // (1 + epsilon) x the mean queue plus the request's cheapest prefill. The
  // pick stands when it is within the bound, or when the best worker within
  // it scores more than soft_margin_ms worse.
  void apply_soft_bound(const RouteRequest& request, Decision& decision) const {
    auto& candidates = decision.candidates;
    double queue_sum = 0;
    double cheapest_prefill = -1;
    std::size_t eligible = 0;
    for (const auto& candidate : candidates) {
      if (!candidate.eligible) {
        continue;
      }
      ++eligible;
      queue_sum += candidate.queue_delay_ms;
      if (cheapest_prefill < 0 || candidate.prefill_ms < cheapest_prefill) {
        cheapest_prefill = candidate.prefill_ms;
      }
    }
    const double bound =
        (1 + cost_.load_bound_epsilon) * (queue_sum + cheapest_prefill) / static_cast<double>(eligible);
    auto within = [&](const Candidate& candidate) { return candidate.queue_delay_ms + cheapest_prefill <= bound; };
    const auto chosen = *decision.worker_index;
    if (within(candidates[chosen])) {
      return;
    }
    auto bounded = pick_best(candidates, request.tie_order(), [&](const Candidate& candidate, const Candidate& best) {
      if (within(candidate) != within(best)) {
        return within(candidate);
      }
      return better(candidate, best);
    });
    if (!bounded.index || !within(candidates[*bounded.index])) {
      return;
    }
    if (candidates[*bounded.index].score - candidates[chosen].score <= *cost_.soft_margin_ms) {
      decision.worker_index = bounded.index;
      decision.reason = Reason::load_bound;
    }
  }

  // The session's previous worker keeps the turn unless the pick beats it
  // by more than both expectations' calibrated error (a worker without
  // enough outcomes yet has none: its price is all there is to go by).
  static void keep_within_margin(const RouteRequest& request, std::span<const WorkerView> workers, Decision& decision) {
    if (!request.previous_turn || !decision.worker_index) {
      return;
    }
    const auto previous = request.previous_turn->worker_index;
    const auto chosen = *decision.worker_index;
    if (previous == chosen || previous >= decision.candidates.size() || !decision.candidates[previous].eligible) {
      return;
    }
    const auto& stay = decision.candidates[previous];
    const auto& move = decision.candidates[chosen];
    const double stay_error = workers[previous].ttft_relative_error * stay.expected_ttft_ms;
    const double move_error = workers[chosen].ttft_relative_error * move.expected_ttft_ms;
    const double margin = std::hypot(stay_error, move_error);
    if (margin > 0 && stay.score - move.score <= margin) {
      decision.worker_index = previous;
      decision.reason = Reason::within_margin;
    }
  }

  // Workers that would hold the same part of the prompt and whose scores
  // differ by less than their rates' noise are ties: they go to the one
  // holding the fewest blocks (new conversations spread over the fleet's
  // memory, which every gateway sees alike), then the fewest requests in
  // flight. A worker that is really slower (twice the cost) still loses.
  static bool better(const Candidate& candidate, const Candidate& best) {
    const bool same_hit = candidate.cached_tokens == best.cached_tokens;
    const double noise = same_hit ? std::max(candidate.score_noise_ms, best.score_noise_ms) : 0.0;
    if (std::abs(candidate.score - best.score) > noise) {
      return candidate.score < best.score;
    }
    if (same_hit && candidate.indexed_blocks != best.indexed_blocks) {
      return candidate.indexed_blocks < best.indexed_blocks;
    }
    return candidate.in_flight < best.in_flight;
  }

  CostModel cost_;
};

}  // namespace

std::unique_ptr<Policy> make_cache_aware(CostModel cost) {
  return std::make_unique<CacheAware>(cost);
}

}  // namespace kvgate::policy
