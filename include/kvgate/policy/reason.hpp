#pragma once
// The decision-log vocabulary (contract.md, README "Decision log"): why a
// request went where it went. One enum, one spelling per value; code
// compares the enum, only logs and JSON see the strings.
#include <algorithm>
#include <array>
#include <cstdint>
#include <string_view>

namespace kvgate::policy {

enum class Reason : std::uint8_t {
  // What a policy says of its own pick.
  round_robin,         // round_robin's turn
  least_load,          // fewest requests in flight
  best_cost,           // lowest expected TTFT, on a worker holding part of the prompt
  best_cost_no_cache,  // lowest expected TTFT, nothing of the prompt cached there
  sticky,              // session_hash: the key's own worker; router: the session's previous worker again
  worker_unhealthy,    // session_hash/prefix_hash: the key's own worker cannot take it
  no_session,          // session_hash: no session key, least loaded instead
  prefix_affinity,     // prefix_hash: the prompt head's worker
  no_full_block,       // prefix_hash: prompt shorter than a block, least loaded instead
  only_candidate,      // one eligible worker left
  no_eligible_worker,  // nothing eligible: the request gets 503
  retry,               // a later attempt after a failure before the first response byte
  imbalanced,          // sglang_cache_aware: the fleet's load is imbalanced, least loaded instead
  prefix_match,        // sglang_cache_aware: the longest cached prefix covers enough of the prompt
  smallest_cache,      // sglang_cache_aware: no worker holds enough: the one holding least
  load_bound,          // cache_aware with a soft margin: the cheapest worker was over the load bound
  within_margin,       // cache_aware: the session's previous worker, within the calibrated error of the cheapest
  // What the router says of a request with a session key (route/README.md).
  new_session,          // first turn the gateway sees of this key
  session_expired,      // the key was known but idle longer than sessions.idle_ttl
  moved_queue,          // the previous worker still holds the blocks; its queue made it slower
  moved_evicted,        // the index says the previous worker lost the session's blocks
  moved_unhealthy,      // the previous worker is down (or failed this request)
  moved_better_prefix,  // another worker holds more of this prompt (e.g. a shared system prompt)
  // Where a disaggregated request's prefill runs (policy/disaggregation.hpp).
  local_prefill,        // on its decoder, which lacks little of the prompt
  remote_prefill,       // on a prefill worker, its KV then moved to the decoder
  prefill_unavailable,  // on its decoder: it lacks much, but no prefill worker can take it
};

inline constexpr std::string_view to_string(Reason reason) {
  switch (reason) {
    case Reason::round_robin:
      return "round_robin";
    case Reason::least_load:
      return "least_load";
    case Reason::best_cost:
      return "best_cost";
    case Reason::best_cost_no_cache:
      return "best_cost_no_cache";
    case Reason::sticky:
      return "sticky";
    case Reason::worker_unhealthy:
      return "worker_unhealthy";
    case Reason::no_session:
      return "no_session";
    case Reason::prefix_affinity:
      return "prefix_affinity";
    case Reason::no_full_block:
      return "no_full_block";
    case Reason::only_candidate:
      return "only_candidate";
    case Reason::no_eligible_worker:
      return "no_eligible_worker";
    case Reason::retry:
      return "retry";
    case Reason::imbalanced:
      return "imbalanced";
    case Reason::prefix_match:
      return "prefix_match";
    case Reason::load_bound:
      return "load_bound";
    case Reason::within_margin:
      return "within_margin";
    case Reason::smallest_cache:
      return "smallest_cache";
    case Reason::new_session:
      return "new_session";
    case Reason::session_expired:
      return "session_expired";
    case Reason::moved_queue:
      return "moved_queue";
    case Reason::moved_evicted:
      return "moved_evicted";
    case Reason::moved_unhealthy:
      return "moved_unhealthy";
    case Reason::moved_better_prefix:
      return "moved_better_prefix";
    case Reason::local_prefill:
      return "local_prefill";
    case Reason::remote_prefill:
      return "remote_prefill";
    case Reason::prefill_unavailable:
      return "prefill_unavailable";
  }
  return "unknown";
}

inline constexpr Reason kLastReason = Reason::prefill_unavailable;

// The session moves the router counts (kvgate_session_moves_total).
// The reasons a session turn leaves its previous worker.
inline constexpr std::array kSessionMoves{Reason::moved_queue, Reason::moved_evicted, Reason::moved_unhealthy,
                                          Reason::moved_better_prefix};
inline constexpr bool is_session_move(Reason reason) {
  return std::find(kSessionMoves.begin(), kSessionMoves.end(), reason) != kSessionMoves.end();
}

// Where the request's LoRA adapter stands on a worker (llm-d's residency
// classes): what loading it there would cost before the prefill starts.
enum class AdapterState : std::uint8_t {
  base,      // the request names the base model: nothing to load
  resident,  // running there, or among the last max_loras adapters routed there
  loadable,  // not resident, and a LoRA slot is free: one load
  evicts,    // not resident and every slot is taken: one load, and another adapter's
  waiting,   // the engine reports requests for it waiting (a load is under way)
};

inline constexpr std::string_view to_string(AdapterState state) {
  switch (state) {
    case AdapterState::base:
      return "base";
    case AdapterState::resident:
      return "resident";
    case AdapterState::loadable:
      return "loadable";
    case AdapterState::evicts:
      return "evicts";
    case AdapterState::waiting:
      return "waiting";
  }
  return "base";
}

// Why a worker was not a candidate for this request.
// prefill_only: a disaggregated fleet's prefill worker never decodes;
// decode_only: its decoders never prefill for another worker.
enum class Ineligible : std::uint8_t {
  none,
  unhealthy,
  ejected,
  already_tried,
  at_capacity,
  prefill_only,
  decode_only
};

inline constexpr std::string_view to_string(Ineligible why) {
  switch (why) {
    case Ineligible::none:
      return "";
    case Ineligible::unhealthy:
      return "unhealthy";
    case Ineligible::ejected:
      return "ejected";
    case Ineligible::already_tried:
      return "already_tried";
    case Ineligible::at_capacity:
      return "at_capacity";
    case Ineligible::prefill_only:
      return "prefill_only";
    case Ineligible::decode_only:
      return "decode_only";
  }
  return "";
}

}  // namespace kvgate::policy
