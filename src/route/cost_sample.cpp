#include "kvgate/route/cost_sample.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>

#include "kvgate/route/routing_table.hpp"

namespace kvgate::route {

void learn_costs(const ModelRoute& model, std::size_t worker_index, const CostSample& sample,
                 const config::CacheAwareOptions& options) {
  const auto& route = model.workers[worker_index];
  auto& costs = route.state->costs();
  const bool priced = sample.expected_ttft_ms > 0;
  // A slot engine: the wait a tracked release ended (0: none measured).
  const double measured_wait = sample.slot_wait_ms.value_or(0.0);
  if (sample.ttft_ms && priced) {
    costs.record_ttft(sample.expected_ttft_ms, *sample.ttft_ms, sample.worker_busy);
    // A slot engine: a request that waited for a slot teaches the wait per
    // request ahead and, when its wait was forecast, the forecast's
    // correction. The wait is the measured one where a tracked release
    // gave it its slot; else (the slots were taken by requests the
    // gateway does not track) its first token beyond the price of
    // everything but the queue, which also carries the prefill price's own
    // error.
    if (sample.slots > 0 && sample.requests_ahead > 0) {
      const double waited =
          measured_wait > 0 ? measured_wait : *sample.ttft_ms - (sample.expected_ttft_ms - sample.queue_delay_ms);
      costs.record_slot_wait(sample.requests_ahead, waited, sample.slots, sample.slot_forecast_ms);
    }
  }
  // How long a request holds a slot: as tracked from its slot's start, or,
  // untracked, a request that found a slot free (its first token plus its
  // decode). Streamed or not: a hold ends with the answer.
  if (sample.slots > 0) {
    if (sample.slot_hold_ms && *sample.slot_hold_ms > 0) {
      costs.record_slot_hold(*sample.slot_hold_ms, sample.slots);
    } else if (sample.requests_ahead == 0 && sample.ttft_ms && sample.decode_ms && priced) {
      costs.record_slot_hold(*sample.ttft_ms + *sample.decode_ms, sample.slots);
    }
  }
  // Whether llama-server keeps a RAM prompt cache is seen only in its
  // answers: what was credited in its slots and in RAM against what it
  // reported.
  const bool token_grained = route.options.cache_model == config::CacheModel::sequences;
  if (sample.cached_tokens && token_grained && !route.options.given.cache_ram_mib) {
    const auto slot_tokens =
        sample.indexed_cached_tokens - std::min(sample.offloaded_cached_tokens, sample.indexed_cached_tokens);
    if (auto verdict = costs.record_ram_cache(slot_tokens, sample.offloaded_cached_tokens, *sample.cached_tokens,
                                              model.block_size)) {
      spdlog::info("worker {}: its answers show {} host-RAM prompt cache (llama-server --cache-ram){}",
                   route.state->id(), *verdict ? "a" : "no",
                   *verdict ? "" : ": its sequences are credited only while in a slot");
    }
  }
  if (!sample.ttft_ms || !sample.cached_tokens || !sample.prompt_tokens) {
    return;
  }
  const auto cached = std::min(*sample.cached_tokens, *sample.prompt_tokens);
  // A slot engine's price level: a request's first token from its slot's
  // start over its price at the priors (with the cached tokens the engine
  // reported: the level, not the prediction, is being learned). A request
  // that waited for a measured release counts from it, with nothing
  // queued before it by then: a worker busy enough that every request
  // waits still learns its level.
  if (sample.slots > 0 && (sample.requests_ahead == 0 || measured_wait > 0)) {
    const policy::PrefillSample started{*sample.prompt_tokens, cached, measured_wait > 0 ? 0 : sample.queued_tokens,
                                        sample.active_tokens, *sample.ttft_ms - measured_wait};
    if (const double at_priors = policy::predicted_ttft_ms(prefill_priors(options), started);
        at_priors > 0 && started.ttft_ms > 0) {
      costs.record_slot_free(started.ttft_ms / at_priors,
                             model.slot_free_answers->fetch_add(1, std::memory_order_relaxed) + 1);
    }
  }
  // A request that found the worker free to start it: its first token is
  // its prefill (a wait for a slot is not the prefill's).
  if (sample.requests_ahead > 0) {
    return;
  }
  const policy::PrefillSample prefill{*sample.prompt_tokens, cached, sample.queued_tokens, sample.active_tokens,
                                      *sample.ttft_ms};
  // The prefill cost (policy/prefill_fit.hpp).
  if (options.learn_prefill_cost) {
    costs.record_prefill(prefill);
    // The worker's speed is judged against the pooled fit as it stood
    // before this sample, which then joins it.
    const double predicted = policy::predicted_ttft_ms(model.pooled_prefill->rates(), prefill);
    if (model.pooled_prefill->observe(prefill) != policy::PrefillFit::Verdict::rejected && predicted > 0) {
      costs.record_prefill_speed(prefill.ttft_ms / predicted);
    }
  }
}

}  // namespace kvgate::route
