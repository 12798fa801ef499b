#pragma once
// Where a disaggregated request's prefill runs, once its decoder is chosen
// (the model's policy picks the decoder over the workers that decode, as it
// picks any worker). Pure: the views the decoder pick saw, in; the choice
// and every alternative's expected time, out.
//
// The decoder prefills itself when what it lacks of the prompt is small:
// at most `local_prefill_tokens` (llm-d's prefix-based decider, Dynamo's
// conditional disaggregation), or, when configured below 1, it holds at
// least `local_prefill_ratio` of the prompt; a short prefill beside its
// decodes stalls them less than a transfer costs, a long one stalls them
// more whatever share it is. Otherwise a prefill worker computes it: the one whose
// expected time to hand the KV over is lowest,
//   queue       = its queued prompt tokens and decoding context (PrefillRates)
//   prefill     = the prompt less what its own cache holds
//   transfer    = the KV of what the decoder lacks, over the link
// (vLLM's NIXL connector reads only the blocks the decoder's cache misses).
// Round robin rotates the prefill pool with the decision's sequence number
// instead. No prefill worker eligible: the decoder prefills
// (prefill_unavailable), so the request is served either way.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "kvgate/policy/policy.hpp"

namespace kvgate::policy {

// Where the KV hand-over's price came from: the configured link
// (kv_bytes_per_token over transfer_gbps) or the model's observed
// hand-overs (workers/learned_transfer.hpp).
enum class TransferSource : std::uint8_t { configured, learned };
std::string_view to_string(TransferSource source);

struct PrefillRule {
  std::uint32_t local_prefill_tokens = 512;
  double local_prefill_ratio = 1;    // 1: never by share
  double transfer_ms_per_token = 0;  // one token's KV bytes over the link
  TransferSource transfer_source = TransferSource::configured;
  bool rotate = false;  // round robin: the prefill pool rotates too
};

// One prefill worker's line: what handing this request's KV to the decoder
// from there is expected to take.
struct PrefillCandidate {
  std::size_t worker = 0;  // position in the views
  std::string_view id;
  bool eligible = false;
  Ineligible ineligible_because = Ineligible::none;
  std::uint32_t cached_tokens = 0;
  double queue_ms = 0;
  double prefill_ms = 0;
  double transfer_ms = 0;
  double expected_ms = 0;
};

struct PrefillChoice {
  std::optional<std::size_t> worker;  // empty: the decoder prefills
  Reason reason = Reason::local_prefill;
  // The decoder's own prefill (its queue and what it lacks), and the chosen
  // prefill worker's expected time with the transfer (< 0: none eligible).
  double local_ms = 0;
  double remote_ms = -1;
  std::uint32_t decoder_cached_tokens = 0;
  // The hand-over's price the candidates were given (ms per moved token).
  double transfer_ms_per_token = 0;
  TransferSource transfer_source = TransferSource::configured;
  std::vector<PrefillCandidate> candidates;  // the prefill workers, in the views' order
};

// `excluded`: workers already tried for this request (a prefill worker that
// failed is not asked again). Precondition: decoder < workers.size().
PrefillChoice choose_prefill(const PrefillRule& rule, const RouteRequest& request, std::span<const WorkerView> workers,
                             std::size_t decoder);

}  // namespace kvgate::policy
