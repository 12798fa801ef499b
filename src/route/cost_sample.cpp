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
  if (sample.ttft_ms && priced) {
    costs.record_ttft(sample.expected_ttft_ms, *sample.ttft_ms, sample.worker_busy);
    // A slot engine: a request that waited for a slot teaches the wait per
    // request ahead (its first token beyond the price of everything but the
    // queue) and, when its wait was forecast, the forecast's correction.
    if (sample.slots > 0 && sample.requests_ahead > 0) {
      costs.record_slot_wait(sample.requests_ahead, *sample.ttft_ms - (sample.expected_ttft_ms - sample.queue_delay_ms),
                             sample.slots, sample.slot_forecast_ms);
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
  // A request that found the worker free to start it: its first token is
  // its prefill (a wait for a slot is not the prefill's).
  if (sample.requests_ahead > 0 || !sample.ttft_ms || !sample.cached_tokens || !sample.prompt_tokens) {
    return;
  }
  const policy::PrefillSample prefill{*sample.prompt_tokens, std::min(*sample.cached_tokens, *sample.prompt_tokens),
                                      sample.queued_tokens, sample.active_tokens, *sample.ttft_ms};
  // A slot engine's price level: the first token over its price at the
  // priors (with the cached tokens the engine reported: the level, not the
  // prediction, is being learned).
  if (sample.slots > 0) {
    if (const double at_priors = policy::predicted_ttft_ms(prefill_priors(options), prefill); at_priors > 0) {
      costs.record_slot_free(prefill.ttft_ms / at_priors);
    }
  }
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
