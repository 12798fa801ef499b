#pragma once
// A worker's prefill time model, as the cost policies price it:
//   prefill_ms(L, cached) = a * (L - cached) + b * (L^2 - cached^2) / 2 + c
// a: the linear work per uncached prompt token (weights, MLP); b: causal
// attention, each new token attending to every earlier one, per (query,
// context) token pair; c: a fixed part (a scheduler step, the HTTP hop).
// The same `a` prices the prompt tokens queued ahead on the worker (FCFS
// chunked prefill computes them first). Learned per worker from completed
// requests (workers/prefill_fit.hpp); before any sample, the configured
// priors.
#include <cstdint>

namespace kvgate::policy {

struct PrefillRates {
  double ms_per_token = 0.027;
  double ms_per_token_pair = 1.31e-6;
  double base_ms = 6;
  std::uint64_t samples = 0;  // completed requests learned from; 0: the priors

  [[nodiscard]] double prefill_ms(std::uint32_t input_tokens, std::uint32_t cached_tokens) const {
    if (cached_tokens > input_tokens) {
      cached_tokens = input_tokens;
    }
    const auto length = static_cast<double>(input_tokens);
    const auto cached = static_cast<double>(cached_tokens);
    return ms_per_token * (length - cached) + ms_per_token_pair * (length * length - cached * cached) / 2 + base_ms;
  }
  // Time to prefill prompt tokens already queued ahead (their attention part
  // is not known here: their lengths are not kept).
  [[nodiscard]] double queue_ms(std::uint64_t queued_tokens) const {
    return ms_per_token * static_cast<double>(queued_tokens);
  }
};

}  // namespace kvgate::policy
