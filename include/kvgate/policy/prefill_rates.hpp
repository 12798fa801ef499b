#pragma once
// A worker's prefill time model, as the cost policies price it:
//   prefill_ms(L, cached) = a * (L - cached) + b * (L^2 - cached^2) / 2 + c
// a: the linear work per uncached prompt token (weights, MLP); b: causal
// attention, each new token attending to every earlier one, per (query,
// context) token pair; c: a fixed part (a scheduler step, the HTTP hop).
// The queue ahead is priced per prompt token queued there (FCFS chunked
// prefill computes them first) and per context token decoding beside it
// (continuous batching runs those steps with the prefill's, each reading
// their context). Learned per worker from completed
// requests (workers/prefill_fit.hpp); before any sample, the configured
// priors.
#include <cstdint>

namespace kvgate::policy {

struct PrefillRates {
  double ms_per_token = 0.027;
  double ms_per_token_pair = 1.31e-6;
  double base_ms = 6;
  std::uint64_t samples = 0;  // completed requests learned from; 0: the priors
  // An 8B model on an H100: 128 KiB of KV per token read at 3.35 TB/s.
  double ms_per_active_token = 4e-5;
  // Per prompt token queued ahead and not yet answered (some may be under
  // way): at most a, learned on its own.
  double ms_per_queued_token = 0.027;
  // The fit's typical relative residual (one request's TTFT against these
  // rates' prediction; 0 with the priors). Two workers whose prices for the
  // same work differ by less are not known to differ: at light load a few
  // percent of learned noise would otherwise send every new conversation to
  // the worker that happens to look fastest (measured: the demo's hit rate
  // 60% against 70% with learning off, its busiest replica 1.6-1.8x).
  double relative_noise = 0;

  [[nodiscard]] double prefill_ms(std::uint32_t input_tokens, std::uint32_t cached_tokens) const {
    if (cached_tokens > input_tokens) {
      cached_tokens = input_tokens;
    }
    const auto length = static_cast<double>(input_tokens);
    const auto cached = static_cast<double>(cached_tokens);
    return ms_per_token * (length - cached) + ms_per_token_pair * (length * length - cached * cached) / 2 + base_ms;
  }
  // Every cost `speed` times as high (a worker that many times slower than
  // the rates it is scaled from); the noise and sample count stay.
  [[nodiscard]] PrefillRates scaled(double speed) const {
    auto result = *this;
    result.ms_per_token *= speed;
    result.ms_per_token_pair *= speed;
    result.base_ms *= speed;
    result.ms_per_active_token *= speed;
    result.ms_per_queued_token *= speed;
    return result;
  }
  // Time before this prefill gets its turn: the prompt tokens already queued
  // ahead (their attention part is not known here: their lengths are not
  // kept), and the decoding requests' share of the steps.
  [[nodiscard]] double queue_ms(std::uint64_t queued_tokens, std::uint64_t active_tokens = 0) const {
    return ms_per_queued_token * static_cast<double>(queued_tokens) +
           ms_per_active_token * static_cast<double>(active_tokens);
  }
};

}  // namespace kvgate::policy
