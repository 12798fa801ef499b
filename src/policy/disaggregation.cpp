#include "kvgate/policy/disaggregation.hpp"

#include <algorithm>

namespace kvgate::policy {

namespace {

double expected_local_ms(const WorkerView& decoder, std::uint32_t input_tokens) {
  return decoder.prefill.queue_ms(decoder.pending_prefill_tokens, decoder.active_tokens) +
         decoder.prefill.prefill_ms(input_tokens, std::min(decoder.cached_tokens, input_tokens));
}

}  // namespace

std::string_view to_string(TransferSource source) {
  switch (source) {
    case TransferSource::configured:
      return "configured";
    case TransferSource::learned:
      return "learned";
  }
  return "configured";
}

PrefillChoice choose_prefill(const PrefillRule& rule, const RouteRequest& request, std::span<const WorkerView> workers,
                             std::size_t decoder) {
  PrefillChoice choice;
  const auto& own = workers[decoder];
  const auto input = request.input_tokens;
  const auto held = std::min(own.cached_tokens, input);
  const auto lacking = input - held;
  choice.decoder_cached_tokens = held;
  choice.transfer_ms_per_token = rule.transfer_ms_per_token;
  choice.transfer_source = rule.transfer_source;
  choice.local_ms = expected_local_ms(own, input);
  choice.candidates.reserve(workers.size());
  for (std::size_t index = 0; index < workers.size(); ++index) {
    const auto& worker = workers[index];
    if (!worker.prefills_for_others || index == decoder) {
      continue;
    }
    PrefillCandidate candidate;
    candidate.worker = index;
    candidate.id = worker.id;
    candidate.cached_tokens = std::min(worker.cached_tokens, input);
    candidate.queue_ms = worker.prefill.queue_ms(worker.pending_prefill_tokens, worker.active_tokens);
    candidate.prefill_ms = worker.prefill.prefill_ms(input, candidate.cached_tokens);
    candidate.transfer_ms = static_cast<double>(lacking) * rule.transfer_ms_per_token;
    candidate.expected_ms = candidate.queue_ms + candidate.prefill_ms + candidate.transfer_ms;
    candidate.ineligible_because = ineligibility(request, worker, index, false);
    candidate.eligible = candidate.ineligible_because == Ineligible::none;
    choice.candidates.push_back(candidate);
  }
  const bool small = lacking <= rule.local_prefill_tokens ||
                     (rule.local_prefill_ratio < 1 && input > 0 &&
                      static_cast<double>(held) >= rule.local_prefill_ratio * static_cast<double>(input));
  if (small || input == 0) {
    choice.reason = Reason::local_prefill;
    return choice;
  }
  // Ties (and round robin) rotate from the sequence number, so equal prefill
  // workers share the load.
  const auto count = choice.candidates.size();
  std::optional<std::size_t> best;
  for (std::size_t offset = 0; offset < count; ++offset) {
    const auto at = static_cast<std::size_t>((request.sequence + offset) % count);
    const auto& candidate = choice.candidates[at];
    if (!candidate.eligible) {
      continue;
    }
    if (!best || (!rule.rotate && candidate.expected_ms < choice.candidates[*best].expected_ms)) {
      best = at;
    }
  }
  if (!best) {
    choice.reason = Reason::prefill_unavailable;
    return choice;
  }
  choice.worker = choice.candidates[*best].worker;
  choice.remote_ms = choice.candidates[*best].expected_ms;
  choice.reason = Reason::remote_prefill;
  return choice;
}

}  // namespace kvgate::policy
