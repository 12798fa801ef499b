#include "kvgate/route/router.hpp"

#include <xxhash.h>

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdio>
#include <new>
#include <type_traits>

#include "kvgate/policy/slot_hold.hpp"
#include "kvgate/policy/slot_reuse.hpp"
#include "kvgate/route/cost_sample.hpp"
#include "kvgate/route/outlier_filter.hpp"

namespace kvgate::route {

using policy::Reason;

namespace {

// Per-thread working memory of a decision, sized to the largest model seen:
// after the first decision a thread decides without allocating (the I/O
// threads and the admin thread each keep one; a decision never suspends).
struct Scratch {
  index::PrefixMatch match;
  std::vector<std::uint32_t> indexed;      // per worker, in configuration order
  std::vector<std::uint32_t> indexed_gpu;  // of those, the GPU tier's leading run
  std::vector<std::uint32_t> full_only;    // of a hybrid model: its full-attention group's run alone
  std::vector<policy::WorkerView> views;
  std::vector<double> speeds;
};

Scratch& scratch_for(std::size_t workers) {
  thread_local Scratch scratch;
  if (scratch.indexed.size() < workers) {
    scratch.indexed.resize(workers);
    scratch.indexed_gpu.resize(workers);
    scratch.full_only.resize(workers);
    scratch.views.resize(workers);
  }
  return scratch;
}

// Per worker: leading prompt tokens its index entries cover, capped as vLLM
// caps a hit (it never serves the last prompt token from the cache, so at
// most floor((input_tokens - 1) / block_size) blocks count). On a hybrid
// model, cut to what the engine's coordinator finds with the local group
// too (prefix/attention.hpp).
std::span<const std::uint32_t> indexed_cached_tokens(const ModelRoute& model, const prompt::PreparedPrompt* prompt,
                                                     const prefix::LocalAttention& attention, Scratch& scratch) {
  const auto count = model.workers.size();
  auto cached = std::span(scratch.indexed).first(count);
  std::fill(cached.begin(), cached.end(), 0);
  auto gpu = std::span(scratch.indexed_gpu).first(count);
  std::fill(gpu.begin(), gpu.end(), 0);
  auto full_only = std::span(scratch.full_only).first(count);
  std::fill(full_only.begin(), full_only.end(), 0);
  if (prompt == nullptr || prompt->input_tokens == 0 || prompt->blocks.empty() || !model.cache) {
    return cached;
  }
  const std::uint32_t reusable_blocks = (prompt->input_tokens - 1) / model.block_size;
  model.cache->index.longest_prefix(prompt->blocks, scratch.match);
  if (attention.hybrid()) {
    for (std::size_t worker = 0; worker < count; ++worker) {
      full_only[worker] = std::min(scratch.match.held(model.workers[worker].slot), reusable_blocks) * model.block_size;
    }
    model.cache->index.limit_to_local_attention(prompt->blocks, attention, model.block_size, reusable_blocks,
                                                scratch.match);
  }
  for (std::size_t worker = 0; worker < count; ++worker) {
    const auto slot = model.workers[worker].slot;
    cached[worker] = std::min(scratch.match.held(slot), reusable_blocks) * model.block_size;
    gpu[worker] = std::min(scratch.match.held_on_gpu(slot), reusable_blocks) * model.block_size;
    if (!attention.hybrid()) {
      full_only[worker] = cached[worker];
    }
  }
  return cached;
}

policy::WorkerView worker_view(const workers::WorkerState& worker, std::uint32_t indexed, std::uint64_t now_ms,
                               const policy::PrefillRates& prefill) {
  // A cluster's replicas count each other's requests (cluster/): the
  // fleet's load, not this replica's share of it.
  policy::WorkerView view{worker.id(), worker.health().healthy(), worker.load().fleet_in_flight(),
                          worker.load().fleet_pending_prefill_tokens()};
  view.pending_requests = worker.load().fleet_pending_requests();
  view.active_tokens = worker.load().fleet_active_tokens();
  view.mean_uncached_tokens = worker.load().mean_uncached_tokens();
  view.drifting = worker.costs().drifting();
  view.cached_tokens = view.drifting ? 0 : indexed;
  view.prefill = prefill;
  view.ejected = worker.breaker().ejected(now_ms);
  view.ms_per_request_ahead = worker.costs().ms_per_request_ahead();
  view.ttft_relative_error = worker.costs().ttft_relative_error();
  view.traffic = worker.load().recent_traffic(now_ms);
  if (auto engine = worker.engine().queue(); engine.waiting) {
    view.engine_waiting_others = engine.others_waiting;
    view.engine_snapshot_age_ms =
        now_ms > engine.scraped_ms ? static_cast<std::int64_t>(now_ms - engine.scraped_ms) : 0;
  }
  return view;
}

// The eligible candidate ranked next after the chosen one (lowest score,
// then fewest in flight, then configuration order).
std::optional<std::size_t> runner_up(const std::vector<policy::Candidate>& candidates, std::size_t chosen) {
  std::optional<std::size_t> best;
  for (std::size_t index = 0; index < candidates.size(); ++index) {
    const auto& candidate = candidates[index];
    if (index == chosen || !candidate.eligible) {
      continue;
    }
    if (!best || candidate.score < candidates[*best].score ||
        (candidate.score == candidates[*best].score && candidate.in_flight < candidates[*best].in_flight)) {
      best = index;
    }
  }
  return best;
}

// Why a session stayed or moved (route/README.md has the rules).
// `previous` is the session's worker's position in the model (the number
// of workers when it is no longer configured).
Reason session_reason(const ModelRoute& model, const RouteDecision& decision, std::size_t previous,
                      std::span<const std::uint32_t> indexed, std::span<const policy::WorkerView> views) {
  if (!decision.session) {
    return Reason::new_session;
  }
  const auto& session = *decision.session;
  if (session.expired) {
    return Reason::session_expired;
  }
  const auto chosen = *decision.worker;
  if (previous == chosen) {
    return Reason::sticky;
  }
  if (previous == model.workers.size() || !decision.candidates[previous].eligible) {
    return Reason::moved_unhealthy;  // down, failed this request, or removed from the configuration
  }
  // The previous turn's prompt is the head of this one: its full blocks
  // should still be on the previous worker. Less than half of them left
  // means the engine evicted them (or the index learned it did).
  const auto shared = std::min(session.last_input_tokens, decision.input_tokens);
  const std::uint32_t expected = shared == 0 ? 0 : (shared - 1) / model.block_size * model.block_size;
  if (expected > 0 && indexed[previous] * 2 < expected) {
    return Reason::moved_evicted;
  }
  if (views[chosen].cached_tokens > views[previous].cached_tokens) {
    return Reason::moved_better_prefix;
  }
  return Reason::moved_queue;
}

}  // namespace

RouteDecision Router::decide(const RoutingTable& table, const ModelRoute& model, const prompt::PreparedPrompt* prompt,
                             const RouteContext& context) const {
  RouteDecision result;
  const auto count = model.workers.size();
  auto& scratch = scratch_for(count);
  // Read once: the layout the events report may change between two reads.
  const auto attention = model.cache ? model.cache->attention.effective() : prefix::LocalAttention{};
  const auto indexed = indexed_cached_tokens(model, prompt, attention, scratch);
  std::size_t previous = count;
  if (context.session_key) {
    result.session = sessions_.find(*context.session_key, context.now_ms);
    if (result.session) {
      previous = model.find_worker(result.session->worker, result.session->worker_position);
    }
  }
  std::optional<RouteDecision::Continuation> continuation;
  if (prompt != nullptr && result.session && !result.session->expired && previous < count &&
      model.workers[previous].options.cache_model == config::CacheModel::sequences) {
    // The previous turn's idle slot holds its answer too.
    const auto& session = *result.session;
    const auto credited = indexed[previous];
    const policy::SlotContinuation turn{credited,
                                        session.last_input_tokens,
                                        session.last_answer_tokens.value_or(0),
                                        session.last_answer_tokens.has_value(),
                                        model.workers[previous].state->costs().answer_reuse(),
                                        prompt->input_tokens,
                                        model.block_size};
    if (policy::continues_previous_slot(turn)) {
      continuation = RouteDecision::Continuation{session.last_input_tokens, *session.last_answer_tokens};
      const auto extra = policy::slot_continuation_tokens(turn) - credited;
      if (scratch.indexed_gpu[previous] == credited) {
        scratch.indexed_gpu[previous] += extra;  // in the slot, not restored from the RAM cache
      }
      scratch.indexed[previous] += extra;
      scratch.full_only[previous] += extra;
    }
  }
  const bool hybrid = attention.hybrid();
  auto& views = scratch.views;
  const auto& cost_options = table.options->routing.cache_aware;
  // Only cache_aware reads the prices, the LRU ages and the return odds:
  // the other policies do not pay for them on the request path.
  const bool priced = table.options->routing.policy == config::PolicyKind::cache_aware;
  const bool eviction_priced = priced && cost_options.eviction_term;
  const auto pooled = model.pooled_prefill->rates();
  const std::uint64_t prompt_blocks =
      prompt != nullptr ? policy::full_prompt_blocks(prompt->input_tokens, model.block_size) : 0;
  const auto fleet =
      priced ? fleet_prices(model, cost_options.prefill_fit == config::PrefillFitScope::relative, scratch.speeds)
             : FleetPrices{};
  for (std::size_t index = 0; index < count; ++index) {
    const auto& state = *model.workers[index].state;
    // Built where it is kept: a view is a few hundred bytes, and assigning a
    // returned one would copy it for every worker of every decision. The
    // view is trivially destructible, so the new one simply replaces it.
    static_assert(std::is_trivially_destructible_v<policy::WorkerView>);
    const auto slots = slot_count(model.workers[index].options);
    ::new (&views[index])
        policy::WorkerView(worker_view(state, indexed[index], context.now_ms,
                                       effective_prefill_rates(cost_options, pooled, fleet, model.workers[index])));
    views[index].slots = slots;
    if (priced && slots > 0 && views[index].in_flight + views[index].engine_waiting_others >= slots) {
      views[index].slot_releases = slot_releases(model.workers[index], context.now_ms).releases;
    }
    if (hybrid) {
      views[index].full_attention_cached_tokens = views[index].drifting ? 0 : scratch.full_only[index];
    }
    if (model.cache) {
      views[index].indexed_blocks = model.cache->index.entries_of(model.workers[index].slot);
    }
    if (eviction_priced) {
      state.event_stream().read_lru_profile(context.now_ms, prompt_blocks, views[index].lru);
    }
    // Beyond the GPU run the engine loads the prefix from a lower tier.
    views[index].offloaded_cached_tokens =
        views[index].cached_tokens - std::min(scratch.indexed_gpu[index], views[index].cached_tokens);
    if (prompt != nullptr && prompt->adapter && *prompt->adapter < model.adapter_hashes.size()) {
      views[index].adapter = state.adapters().state(*prompt->adapter, model.adapter_hashes[*prompt->adapter],
                                                    model.adapters.size(), model.max_loras);
    }
    if (model.disaggregation) {
      const auto role = model.workers[index].options.role;
      views[index].decodes = role != config::WorkerRole::prefill;
      views[index].prefills_for_others = role == config::WorkerRole::prefill;
    }
  }
  lift_ejections_in_panic(std::span(views.data(), count));
  const auto& admission = table.options->admission;
  if (admission.max_in_flight_per_worker > 0 || admission.hold_slots) {
    // With slots held, a slot engine is full for this request when its
    // slots are running or kept for other sessions' next turns.
    const auto hold_key = context.session_key ? slot_hold_key(*context.session_key) : 0;
    const auto limit = admission.max_in_flight_per_worker;
    bool any_room = false;
    for (std::size_t index = 0; index < count; ++index) {
      const auto slots = held_slot_count(admission, model.workers[index]);
      bool full = limit > 0 && views[index].in_flight >= limit;
      if (slots > 0) {
        const auto& holds = model.workers[index].state->load().slot_holds();
        full = full || views[index].in_flight + holds.held_for_others(hold_key, context.now_ms) >= slots;
      }
      views[index].at_capacity = full;
      any_room = any_room || (views[index].healthy && !views[index].ejected && !views[index].at_capacity);
    }
    if (!any_room) {
      for (std::size_t index = 0; index < count; ++index) {
        views[index].at_capacity = false;
      }
    }
  }
  const auto view_span = std::span<const policy::WorkerView>(views.data(), count);
  policy::RouteRequest request{model.name, context.session_key, context.sequence, context.excluded};
  request.block_size = model.block_size;
  request.ms_per_offloaded_token = model.ms_per_offloaded_token;
  request.adapter_load_ms = model.adapter_load->load_ms(model.lora_load_ms);
  const auto returns = eviction_priced ? model.session_gaps->model() : policy::ReturnModel();
  request.returns = eviction_priced ? &returns : nullptr;
  if (result.session && !result.session->expired && context.now_ms >= result.session->last_seen_ms &&
      previous < count) {
    request.previous_turn = policy::RouteRequest::PreviousTurn{
        previous, static_cast<double>(context.now_ms - result.session->last_seen_ms)};
  }
  if (prompt != nullptr) {
    request.input_tokens = prompt->input_tokens;
    request.prompt_blocks = prompt->blocks;
    result.input_tokens = prompt->input_tokens;
  }
  // Not the per-process sequence: gateways that share a fleet must break
  // the same ties the same way (README, "Several gateways").
  if (context.session_key) {
    request.tie_break = XXH3_64bits(context.session_key->data(), context.session_key->size());
  } else if (prompt != nullptr && !prompt->blocks.empty()) {
    request.tie_break = prompt->blocks.front();
  }
  auto decision = table.policy->decide(request, view_span);
  result.worker = decision.worker_index;
  result.policy_reason = decision.reason;
  result.reason = decision.reason;
  result.candidates = std::move(decision.candidates);
  result.work_price = decision.work_price;
  if (!result.worker) {
    return result;
  }
  const auto chosen = *result.worker;
  result.predicted_cached_tokens = views[chosen].cached_tokens;
  for (const auto& candidate : result.candidates) {
    if (candidate.eligible) {
      result.best_cached_tokens = std::max(result.best_cached_tokens, candidate.cached_tokens);
    }
  }
  result.indexed_cached_tokens = indexed[chosen];
  if (chosen == previous) {
    result.continuation = continuation;
  }
  result.full_attention_cached_tokens = scratch.full_only[chosen];
  result.offloaded_cached_tokens = indexed[chosen] - std::min(scratch.indexed_gpu[chosen], indexed[chosen]);
  result.evicted_blocks_at_decision =
      model.workers[chosen].state->event_stream().evicted_blocks.load(std::memory_order_relaxed);
  result.queued_tokens = views[chosen].pending_prefill_tokens;
  result.active_tokens = views[chosen].active_tokens;
  result.worker_busy = views[chosen].in_flight > 0 || views[chosen].engine_waiting_others > 0;
  if (held_slot_count(admission, model.workers[chosen]) > 0 && prompt != nullptr) {
    result.reprefill_ms = views[chosen].prefill.prefill_ms(prompt->input_tokens, 0);
  }
  result.kv_usage = model.workers[chosen].state->engine().kv_usage();
  result.runner_up = runner_up(result.candidates, chosen);
  if (result.runner_up) {
    const auto& winner = result.candidates[chosen];
    const auto& second = result.candidates[*result.runner_up];
    if (winner.expected_ttft_ms >= 0 && second.expected_ttft_ms >= 0) {
      result.gap_ms = second.expected_ttft_ms - winner.expected_ttft_ms;
    }
  }
  if (const auto& pd = model.disaggregation) {
    policy::PrefillRule rule{
        pd->local_prefill_tokens, pd->local_prefill_ratio,
        model.transfer->ms_per_token(pd->transfer_ms_per_token_prior),
        model.transfer->learned() ? policy::TransferSource::learned : policy::TransferSource::configured,
        table.options->routing.policy == config::PolicyKind::round_robin};
    result.prefill = policy::choose_prefill(rule, request, view_span, chosen);
  }
  if (previous < count) {
    result.session_previous = previous;
  }
  if (!context.excluded.empty()) {
    result.reason = Reason::retry;
  } else if (context.session_key) {
    result.reason = session_reason(model, result, previous, indexed, view_span);
  }
  return result;
}

Attempt Router::commit(const RoutingTable& table, const ModelRoute& model, const RouteDecision& decision,
                       const prompt::PreparedPrompt* prompt, const RouteContext& context) {
  const auto chosen = *decision.worker;
  const auto& worker = model.workers[chosen];
  const auto uncached = decision.input_tokens - std::min(decision.predicted_cached_tokens, decision.input_tokens);
  const auto prefill_worker = decision.prefill_worker();
  // A remotely prefilled request only decodes on its decoder: the prefill
  // worker carries its pending prefill.
  Attempt attempt(*this, table, model, chosen,
                  workers::InFlightRequest(*worker.state, prefill_worker ? 0 : uncached, decision.input_tokens,
                                           slot_count(worker.options), context.now_ms));
  // The work it adds there, as priced (policies that price nothing: the
  // request alone), for the congestion it causes the next requests.
  const double priced_prefill =
      chosen < decision.candidates.size() ? std::max(decision.candidates[chosen].prefill_ms, 0.0) : 0.0;
  worker.state->load().record_traffic(prefill_worker ? 0.0 : priced_prefill, context.now_ms);
  attempt.prediction_ = {decision.reason,
                         decision.input_tokens,
                         decision.indexed_cached_tokens,
                         decision.offloaded_cached_tokens,
                         decision.evicted_blocks_at_decision,
                         decision.queued_tokens,
                         decision.active_tokens,
                         decision.worker_busy};
  if (chosen < decision.candidates.size()) {
    const auto& candidate = decision.candidates[chosen];
    attempt.prediction_.expected_ttft_ms = candidate.expected_ttft_ms;
    attempt.prediction_.requests_ahead = candidate.requests_ahead;
    attempt.prediction_.slot_forecast_ms = candidate.slot_forecast_ms;
    attempt.prediction_.queue_delay_ms = std::max(0.0, candidate.queue_delay_ms);
  }
  attempt.prediction_.slots = slot_count(worker.options);
  attempt.prediction_.reprefill_ms = decision.reprefill_ms;
  if (decision.continuation) {
    attempt.prediction_.continued = true;
    attempt.prediction_.continued_input_tokens = decision.continuation->previous_input_tokens;
    attempt.prediction_.continued_answer_tokens = decision.continuation->previous_answer_tokens;
  }
  // A move's counterfactual: the previous worker's expected TTFT, as that
  // worker's calibration says it turns out.
  if (decision.session && policy::is_session_move(decision.reason) && decision.session_previous &&
      *decision.session_previous < decision.candidates.size()) {
    const auto& stay = decision.candidates[*decision.session_previous];
    if (stay.eligible && stay.expected_ttft_ms > 0) {
      attempt.prediction_.stay_expected_ttft_ms =
          stay.expected_ttft_ms * model.workers[*decision.session_previous].state->costs().ttft_ratio();
    }
  }
  if (prompt != nullptr && prompt->adapter && chosen < decision.candidates.size()) {
    attempt.prediction_.adapter_load_ms = std::max(0.0, decision.candidates[chosen].adapter_load_ms);
    worker.state->series().adapter_placement(decision.candidates[chosen].adapter);
  }
  if (prefill_worker) {
    const auto& prefill = *decision.prefill;
    std::uint32_t cached_there = 0;
    double prefill_there_ms = 0;
    for (const auto& candidate : prefill.candidates) {
      if (candidate.worker == *prefill_worker) {
        cached_there = candidate.cached_tokens;
        prefill_there_ms = candidate.prefill_ms;
      }
    }
    model.workers[*prefill_worker].state->load().record_traffic(prefill_there_ms, context.now_ms);
    attempt.prefill_.emplace(
        Attempt::PrefillLeg{*prefill_worker,
                            workers::InFlightRequest(*model.workers[*prefill_worker].state,
                                                     decision.input_tokens - cached_there, decision.input_tokens),
                            cached_there});
    attempt.prediction_.remote_prefill = true;
    attempt.prediction_.moved_tokens = decision.input_tokens - prefill.decoder_cached_tokens;
  }
  // Decision sequence numbers are unique: they name this attempt's insert.
  attempt.ticket_ = context.sequence;
  // The chosen worker will hold these blocks once it has run the prompt:
  // the index learns it now, so that a burst sharing a new prefix follows
  // the first request instead of scattering before the engine's events.
  // The engine loads the adapter for this request (evicting its least
  // recently used one when full): the next decision sees it held here.
  if (prompt != nullptr && prompt->adapter) {
    worker.state->adapters().routed(*prompt->adapter, context.now_ms);
  }
  if (index_writer_ != nullptr && prompt != nullptr && !prompt->blocks.empty()) {
    attempt.blocks_.assign(prompt->blocks.begin(), prompt->blocks.end());
    if (prefill_worker) {
      // The prefill worker computes the whole prompt and keeps its blocks;
      // the decoder holds them once they have moved, which its insert waits
      // for (end_prefill): a prefill that fails must not leave the decoder
      // credited with a prompt it never received when the request is
      // decided again.
      index_writer_->assume(model.cache, model.workers[*prefill_worker].slot, attempt.blocks_, attempt.ticket_);
      if (peers_ != nullptr) {
        peers_->assumed(model.name, model.workers[*prefill_worker].state->id(), attempt.blocks_, attempt.ticket_);
      }
    } else {
      index_writer_->assume(model.cache, worker.slot, attempt.blocks_, attempt.ticket_);
      attempt.decoder_assumed_ = true;
      if (peers_ != nullptr) {
        peers_->assumed(model.name, worker.state->id(), attempt.blocks_, attempt.ticket_);
      }
    }
  }
  if (context.session_key) {
    attempt.session_key_.assign(*context.session_key);
    SessionTurn turn;
    turn.worker = worker.state->id();
    turn.worker_position = static_cast<std::uint32_t>(chosen);
    turn.reason = decision.reason;
    if (decision.prefill) {
      turn.prefill = decision.prefill->reason;
      if (prefill_worker) {
        turn.prefill_worker = model.workers[*prefill_worker].state->id();
      }
    }
    turn.input_tokens = decision.input_tokens;
    turn.predicted_cached_tokens = decision.indexed_cached_tokens;
    turn.kv_usage = decision.kv_usage;
    // A retry re-targets the request's own turn instead of adding one.
    const bool same_request = !context.excluded.empty();
    if (!same_request) {
      if (decision.session && !decision.session->expired && context.now_ms >= decision.session->last_seen_ms) {
        model.session_gaps->record_next_turn(context.now_ms - decision.session->last_seen_ms);
        const auto arrived = context.arrived_ms > 0 ? std::min(context.arrived_ms, context.now_ms) : context.now_ms;
        if (const auto answered = decision.session->last_answered_ms; answered && arrived >= *answered) {
          model.session_gaps->record_think(arrived - *answered);
        }
      } else {
        model.session_gaps->record_first_turn();
      }
    }
    // The turn came: the slots kept for it are free, and the one where it
    // goes is what it was kept for.
    if (table.options->admission.hold_slots) {
      const auto hold_key = slot_hold_key(*context.session_key);
      for (std::size_t index = 0; index < model.workers.size(); ++index) {
        if (model.workers[index].state->load().slot_holds().take(hold_key, context.now_ms) && index == chosen) {
          stats_.slot_hold(model.name, SessionStats::HoldOutcome::used);
        }
      }
    }
    const auto blocks =
        prompt != nullptr ? std::span<const std::uint64_t>(prompt->blocks) : std::span<const std::uint64_t>();
    attempt.session_turn_ = sessions_.commit_turn(*context.session_key, std::move(turn), context.now_ms, same_request,
                                                  context.session_key_source, blocks);
    if (peers_ != nullptr) {
      PeerTurn published{
          attempt.session_turn_,
          worker.state->id(),
          prefill_worker ? std::string_view(model.workers[*prefill_worker].state->id()) : std::string_view(),
          decision.reason,
          decision.prefill ? std::optional(decision.prefill->reason) : std::nullopt,
          decision.input_tokens,
          decision.indexed_cached_tokens,
          decision.kv_usage};
      peers_->turn(model.name, *context.session_key, context.session_key_source, published, same_request);
    }
    if (policy::is_session_move(decision.reason)) {
      std::uint32_t added = 0;
      if (decision.session_previous && *decision.session_previous < decision.candidates.size()) {
        const auto held = decision.candidates[*decision.session_previous].cached_tokens;
        const auto chosen = decision.candidates[*decision.worker].cached_tokens;
        added = held > chosen ? held - chosen : 0;
      }
      stats_.moved(model.name, decision.reason, added);
    }
  }
  return attempt;
}

void Router::assume_on_decoder(Attempt& attempt) {
  if (index_writer_ != nullptr && !attempt.blocks_.empty() && !attempt.decoder_assumed_) {
    index_writer_->assume(attempt.model_->cache, attempt.model_->workers[attempt.worker_].slot, attempt.blocks_,
                          attempt.ticket_);
    attempt.decoder_assumed_ = true;
    if (peers_ != nullptr) {
      peers_->assumed(attempt.model_->name, attempt.model_->workers[attempt.worker_].state->id(), attempt.blocks_,
                      attempt.ticket_);
    }
  }
}

void Router::withdraw(const Attempt& attempt, std::size_t worker) {
  if (worker == attempt.worker_ && !attempt.decoder_assumed_) {
    return;
  }
  if (index_writer_ != nullptr && !attempt.blocks_.empty()) {
    index_writer_->withdraw(attempt.model_->cache, attempt.model_->workers[worker].slot, attempt.blocks_,
                            attempt.ticket_);
    if (peers_ != nullptr) {
      peers_->withdrawn(attempt.model_->name, attempt.model_->workers[worker].state->id(), attempt.blocks_,
                        attempt.ticket_);
    }
  }
}

void Router::finish(const Attempt& attempt, std::optional<std::uint32_t> reported_cached_tokens) {
  const auto& route = attempt.model_->workers[attempt.worker_];
  if (index_writer_ != nullptr && route.options.cache_model == config::CacheModel::sequences) {
    // A remotely prefilled request's figure counts the moved KV: not the slot's.
    std::optional<std::uint32_t> reported_blocks;
    if (reported_cached_tokens && !attempt.prediction_.remote_prefill && attempt.model_->block_size > 0) {
      reported_blocks = *reported_cached_tokens / attempt.model_->block_size;
    }
    index_writer_->finish(attempt.model_->cache, route.slot, attempt.ticket_, reported_blocks);
    if (peers_ != nullptr) {
      peers_->finished(attempt.model_->name, route.state->id(), attempt.ticket_);
    }
  }
}

void Router::answer_read(const Attempt& attempt, const EngineAnswer& answer, std::uint64_t now_ms) {
  finish(attempt, answer.cached_tokens);
  if (attempt.session_turn_ == 0) {
    return;
  }
  sessions_.record_answer(attempt.session_key_, attempt.session_turn_, answer.completion_tokens, now_ms);
  if (peers_ != nullptr) {
    peers_->answered(attempt.session_key_, attempt.session_turn_, answer.completion_tokens);
  }
  // A slot engine's slot now holds the conversation: kept for its next
  // turn while that is expected to save more than the slot idles.
  const auto& model = *attempt.model_;
  if (held_slot_count(attempt.table_->options->admission, model.workers[attempt.worker_]) > 0) {
    const auto hold = policy::choose_slot_hold(model.session_gaps->think_model(), attempt.prediction_.reprefill_ms);
    auto& holds = model.workers[attempt.worker_].state->load().slot_holds();
    if (hold.hold_ms > 0 &&
        holds.hold(slot_hold_key(attempt.session_key_), now_ms + static_cast<std::uint64_t>(hold.hold_ms), now_ms)) {
      stats_.slot_hold(model.name, SessionStats::HoldOutcome::kept);
    }
  }
}

std::uint64_t slot_hold_key(std::string_view session_key) {
  return XXH3_64bits(session_key.data(), session_key.size()) | 1;
}

void Router::note_traffic(const Attempt& attempt, std::size_t worker_index, workers::FailureCause failure,
                          std::uint64_t now_ms) {
  const auto& table = *attempt.table_;
  const auto& model = *attempt.model_;
  auto& worker = *model.workers[worker_index].state;
  const bool may_eject = failure == workers::FailureCause::none ||
                         may_eject_another(model, now_ms, table.options->outlier_detection.max_ejected_percent);
  const auto change = worker.breaker().record_traffic(failure, now_ms, table.ejection, may_eject);
  if (change == workers::CircuitBreaker::Change::ejected) {
    const auto status = worker.breaker().status(now_ms);
    spdlog::warn("worker {} ejected for {} ms after failed requests (last: {}; ejection {} in a row)", worker.id(),
                 status.ejected_until_ms - now_ms, workers::to_string(failure), status.ejections_in_a_row);
    worker.series().ejected(workers::to_string(failure));
  } else if (change == workers::CircuitBreaker::Change::restored) {
    spdlog::info("worker {} answered its probe after an ejection: back in routing", worker.id());
  }
}

void Router::record_outcome(const Attempt& attempt, const ResponseOutcome& outcome) {
  const auto& table = *attempt.table_;
  const auto& model = *attempt.model_;
  auto& worker = *model.workers[attempt.worker_].state;
  const auto& decision = attempt.prediction_;
  if (outcome.status == 200 && outcome.prompt_tokens && outcome.cached_tokens) {
    worker.series().prompt_tokens(*outcome.prompt_tokens, *outcome.cached_tokens);
  }
  // A remotely prefilled request's moved KV: from the prefill worker's
  // answer to the decoder's first token, per moved token.
  if (decision.remote_prefill && outcome.first_token_streamed && outcome.status == 200 && outcome.retries == 0 &&
      outcome.handover_ms) {
    model.transfer->observe(decision.moved_tokens, *outcome.handover_ms);
  }
  // The expected first token against the one the client got: a clean,
  // streamed first attempt whose decision priced it (a retry's expectation
  // was another worker's; a non-streamed answer's first byte is its end).
  const bool clean_first_token = outcome.status == 200 && outcome.retries == 0 && outcome.first_token_streamed &&
                                 outcome.ttft_ms && !decision.remote_prefill;
  // What the answer teaches of the worker's costs (route/cost_sample.hpp):
  // only a clean first attempt compares like with like, and a decoder's
  // figures are not its prefill's. The cluster's other replicas learn it too.
  if (outcome.status == 200 && outcome.retries == 0 && !decision.remote_prefill) {
    const CostSample sample{decision.expected_ttft_ms,
                            decision.queue_delay_ms,
                            decision.slot_forecast_ms,
                            decision.worker_busy,
                            decision.slots,
                            decision.requests_ahead,
                            decision.queued_tokens,
                            decision.active_tokens,
                            decision.indexed_cached_tokens,
                            decision.offloaded_cached_tokens,
                            outcome.first_token_streamed ? outcome.ttft_ms : std::nullopt,
                            outcome.decode_ms,
                            outcome.prompt_tokens,
                            outcome.cached_tokens,
                            attempt.slot_times_.hold_ms,
                            attempt.slot_times_.wait_ms};
    learn_costs(model, attempt.worker_, sample, table.options->routing.cache_aware);
    if (peers_ != nullptr) {
      peers_->learned(model.name, worker.id(), sample);
    }
  }
  // A move's realized gain: what staying was expected to take, calibrated,
  // against what the move got.
  if (clean_first_token && decision.stay_expected_ttft_ms > 0) {
    stats_.move_measured(model.name, decision.stay_expected_ttft_ms - *outcome.ttft_ms);
  }
  // Only a clean first attempt compares like with like: a retry's
  // prediction was made for another worker's state. A decoder that
  // received the prompt's KV counts it as cached: the prefill worker's
  // answer was compared instead (record_prefill_outcome).
  if (outcome.cached_tokens && outcome.status == 200 && outcome.retries == 0 && !decision.remote_prefill) {
    const auto reported = *outcome.cached_tokens;
    // An engine that reuses prefixes token by token (llama.cpp's slots)
    // reports within a block of kvgate's block-grained prediction, either
    // way (a slot's last partial block, or a prompt ending mid-block):
    // within that, the prediction is as exact as blocks can be.
    const auto& options = model.workers[attempt.worker_].options;
    const bool token_grained = options.cache_model == config::CacheModel::sequences;
    const auto distance = decision.indexed_cached_tokens > reported ? decision.indexed_cached_tokens - reported
                                                                    : reported - decision.indexed_cached_tokens;
    const bool exact = distance == 0 || (token_grained && distance < model.block_size);
    const auto predicted = exact ? reported : decision.indexed_cached_tokens;
    worker.series().cache_prediction(exact                  ? obs::PredictionOutcome::exact
                                     : predicted > reported ? obs::PredictionOutcome::over
                                                            : obs::PredictionOutcome::under);
    const auto& drift_options = table.options->routing.drift;
    // Evictions since the decision, less the most this request's own
    // blocks (its uncached prompt and its answer, plus a partial block) can
    // have caused: the engine never evicts a request's own hits to make
    // room for it, so what took the missed blocks was other traffic.
    const std::uint64_t evicted_tokens =
        (worker.event_stream().evicted_blocks.load(std::memory_order_relaxed) - decision.evicted_blocks_at_decision) *
        model.block_size;
    const std::uint64_t prompt_tokens = outcome.prompt_tokens.value_or(decision.input_tokens);
    const std::uint64_t own_tokens = prompt_tokens - std::min<std::uint64_t>(reported, prompt_tokens) +
                                     outcome.completion_tokens.value_or(0) + model.block_size;
    const auto others_evicted = evicted_tokens > own_tokens ? evicted_tokens - own_tokens : 0;
    const auto change = worker.costs().record_prediction(predicted, reported, others_evicted, drift_options);
    if (change != workers::DriftChange::none) {
      const auto evidence = worker.costs().drift_evidence();
      worker.series().set_drifting(change == workers::DriftChange::started);
      if (change == workers::DriftChange::started) {
        spdlog::warn(
            "worker {}: cache predictions drifting: {} of the last {} predictions over the engine's figure "
            "({} tokens predicted, {} reported); its index is not credited until they agree again. {}",
            worker.id(), evidence.over_predicted, evidence.samples, evidence.predicted_tokens, evidence.reported_tokens,
            likely_drift_cause(model, model.workers[attempt.worker_]));
      } else {
        spdlog::info("worker {}: cache predictions agree again ({} of the last {} over); its index is credited",
                     worker.id(), evidence.over_predicted, evidence.samples);
      }
    }
  }
  // A turn that continued its previous turn's slot: how much of that
  // turn's answer the engine reused (policy/slot_reuse.hpp). A figure
  // short of the previous prompt's whole blocks is a slot lost meanwhile,
  // which says nothing of answers.
  if (decision.continued && outcome.cached_tokens && outcome.status == 200 && outcome.retries == 0 &&
      !decision.remote_prefill &&
      *outcome.cached_tokens >= decision.continued_input_tokens / model.block_size * model.block_size) {
    const auto reported = *outcome.cached_tokens;
    worker.costs().record_answer_reuse(
        reported > decision.continued_input_tokens ? reported - decision.continued_input_tokens : 0,
        decision.continued_answer_tokens);
  }
  // The same teaches an adapter's load time: the first token's excess over
  // what was expected without the load (workers/learned_adapter_load.hpp).
  if (outcome.first_token_streamed && outcome.ttft_ms && outcome.status == 200 && outcome.retries == 0 &&
      decision.expected_ttft_ms >= 0 && decision.adapter_load_ms >= 0) {
    model.adapter_load->observe(decision.adapter_load_ms > 0,
                                *outcome.ttft_ms - (decision.expected_ttft_ms - decision.adapter_load_ms));
  }
  if (attempt.session_turn_ == 0) {
    return;
  }
  const SessionTable::Outcome turn_outcome{outcome.status, outcome.cached_tokens, outcome.prompt_tokens,
                                           outcome.ttft_ms, outcome.decode_ms};
  sessions_.record_outcome(attempt.session_key_, attempt.session_turn_, turn_outcome);
  if (peers_ != nullptr) {
    peers_->outcome(model.name, attempt.session_key_, attempt.session_turn_, turn_outcome);
  }
  const auto prompt_tokens = outcome.prompt_tokens.value_or(decision.input_tokens);
  if (attempt.session_turn_ >= 2 && outcome.status == 200 && outcome.cached_tokens && prompt_tokens > 0) {
    stats_.turn_hit(model.name,
                    std::min(1.0, static_cast<double>(*outcome.cached_tokens) / static_cast<double>(prompt_tokens)));
  }
}

void Router::record_prefill_outcome(const Attempt& attempt, std::optional<std::uint32_t> cached_tokens,
                                    std::optional<std::uint32_t> prompt_tokens) {
  const auto& model = *attempt.model_;
  const auto& leg = *attempt.prefill_;
  auto& worker = *model.workers[leg.worker].state;
  if (prompt_tokens && cached_tokens) {
    worker.series().prompt_tokens(*prompt_tokens, *cached_tokens);
  }
  if (!cached_tokens) {
    return;
  }
  const auto reported = *cached_tokens;
  const auto predicted = leg.predicted_cached_tokens;
  worker.series().cache_prediction(predicted == reported  ? obs::PredictionOutcome::exact
                                   : predicted > reported ? obs::PredictionOutcome::over
                                                          : obs::PredictionOutcome::under);
  const auto change = worker.costs().record_prediction(predicted, reported, 0, attempt.table_->options->routing.drift);
  if (change != workers::DriftChange::none) {
    worker.series().set_drifting(change == workers::DriftChange::started);
    if (change == workers::DriftChange::started) {
      spdlog::warn(
          "prefill worker {}: cache predictions drifting; its index is not credited until they agree "
          "again. {}",
          worker.id(), likely_drift_cause(model, model.workers[leg.worker]));
    } else {
      spdlog::info("prefill worker {}: cache predictions agree again; its index is credited", worker.id());
    }
  }
}

std::string likely_drift_cause(const ModelRoute& model, const WorkerRoute& worker) {
  const auto& options = worker.options;
  const auto identity = worker.state->engine().identity();
  const auto scrape = worker.state->engine().last();
  const bool sequences = options.cache_model == config::CacheModel::sequences;
  if (identity && identity->kind == config::EngineKind::llamacpp && !sequences && options.kv_events.empty()) {
    return "Likely cause: the engine is llama.cpp (its " + identity->evidence +
           ") but the worker is indexed as a block cache: remove cache_model: blocks (or set engine: llamacpp)";
  }
  if (identity && identity->kind != config::EngineKind::llamacpp && sequences) {
    return "Likely cause: the engine is " + std::string(config::to_string(identity->kind)) + " (its " +
           identity->evidence +
           "), not llama-server, but the worker is indexed as llama.cpp slots: remove engine: "
           "and cache_model:";
  }
  if (model.cache) {
    const auto configured = model.cache->attention.configured();
    const auto reported = model.cache->attention.reported();
    if (reported && configured.hybrid() && *reported != configured) {
      return "Likely cause: models[].attention says " + prefix::to_string(configured) +
             " but the engines' KV events report " +
             (reported->hybrid() ? prefix::to_string(*reported) : std::string("full attention only")) +
             ": the events' layout is used for every worker, so a worker that differs is mispredicted (fix or "
             "remove models[].attention)";
    }
    if (!reported && configured.hybrid() && options.kv_events.empty()) {
      return "Likely cause: without KV events the index models the " + prefix::to_string(configured) +
             " of models[].attention; check it against the model's config.json (sliding_window, "
             "attention_chunk_size) and kv_capacity_blocks";
    }
  }
  if (scrape && scrape->load.block_size && *scrape->load.block_size != model.block_size) {
    return "Likely cause: the engine's KV blocks are " + std::to_string(*scrape->load.block_size) +
           " tokens (vllm:cache_config_info) and the model's block_size is " + std::to_string(model.block_size) +
           ": set block_size: " + std::to_string(*scrape->load.block_size);
  }
  if (sequences) {
    return "Likely cause: llama-server's slots or RAM cache differ from the model of them (slots " +
           std::to_string(options.slots) + (options.given.slots ? ", configured" : ", from /props") +
           "; cache_ram_mib " + std::to_string(options.cache_ram_mib) +
           (options.given.cache_ram_mib ? ", configured" : ", assumed") + "), or the tokenizer is not the engine's";
  }
  if (options.kv_events.empty()) {
    const auto engine_blocks = scrape && scrape->load.num_gpu_blocks ? *scrape->load.num_gpu_blocks : 0;
    return "Likely cause: without KV events the index guesses the engine's evictions from kv_capacity_blocks (" +
           (options.kv_capacity_blocks > 0 ? std::to_string(options.kv_capacity_blocks) : std::string("the default")) +
           (engine_blocks > 0 ? "; the engine reports " + std::to_string(engine_blocks) : std::string()) +
           "): enable its KV events, or check kv_capacity_blocks and the tokenizer";
  }
  return "Likely cause: the tokenizer is not the engine's, or the event stream missed events (check "
         "kvgate_kv_event_gaps_total)";
}

std::string route_receipt(const ModelRoute& model, const RouteDecision& decision) {
  std::string receipt;
  if (!decision.worker) {
    return receipt;
  }
  receipt.reserve(128);
  receipt += "worker=";
  receipt += model.workers[*decision.worker].state->id();
  receipt += "; reason=";
  receipt += policy::to_string(decision.reason);
  receipt += "; predicted_cached=";
  receipt += std::to_string(decision.indexed_cached_tokens);
  if (decision.full_attention_cached_tokens != decision.indexed_cached_tokens) {
    // A hybrid model whose local group holds less than its full-attention
    // group: what a full-attention-only index would have predicted.
    receipt += "; full_attention_cached=";
    receipt += std::to_string(decision.full_attention_cached_tokens);
  }
  if (decision.prefill) {
    receipt += "; prefill=";
    receipt += policy::to_string(decision.prefill->reason);
    if (const auto prefill_worker = decision.prefill_worker()) {
      receipt += "; prefill_worker=";
      receipt += model.workers[*prefill_worker].state->id();
    }
  }
  if (decision.runner_up) {
    receipt += "; runner_up=";
    receipt += model.workers[*decision.runner_up].state->id();
    if (decision.gap_ms >= 0) {
      char gap[32];
      std::snprintf(gap, sizeof gap, "%.1f", decision.gap_ms);
      receipt += "; gap_ms=";
      receipt += gap;
    }
  }
  return receipt;
}

}  // namespace kvgate::route
