#pragma once
// The routing decision, in one room (after Dynamo's KV router: it decides,
// it does not send). For a prepared prompt it looks up which workers hold
// which of its blocks, builds the policy's view of every worker of the
// model, asks the configured policy, and explains the answer: the reason
// in the decision-log vocabulary (for requests with a session key, whether
// the session stayed or why it moved), the runner-up and the expected-TTFT
// gap, and what committing the decision will change.
//
// decide() has no side effects, so POST /debug/route (which only decides)
// and the request that follows it, with the same inputs, get the same
// worker. commit() applies a decision and returns the Attempt that owns
// what it changed (the worker's in-flight and pending prefill accounting,
// the routing-time index insert, the session's turn) until the attempt
// ends and its outcome is recorded (route/attempt.hpp): one room starts
// and ends every attempt.
//
// Threading: every method may be called from any I/O thread or the admin
// thread at once (the session table locks a shard; the rest reads atomics
// and the index's lock-free lookups; inserts go to the index writer's
// queue).
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "kvgate/kv_events/index_writer.hpp"
#include "kvgate/policy/policy.hpp"
#include "kvgate/prompt/prepared_prompt.hpp"
#include "kvgate/route/attempt.hpp"
#include "kvgate/route/peer_publisher.hpp"
#include "kvgate/route/routing_table.hpp"
#include "kvgate/route/session_stats.hpp"
#include "kvgate/route/session_table.hpp"
#include "kvgate/workers/worker_state.hpp"

namespace kvgate::route {

// What the request brings besides its prompt.
struct RouteContext {
  std::optional<std::string_view> session_key;
  // The gateway's decision sequence number (rotation in round_robin and in
  // tie-breaks): the next real request gets GatewayContext's next number,
  // a dry run the number that request would get.
  std::uint64_t sequence = 0;
  // Workers of the model already tried for this request (retries).
  std::span<const std::size_t> excluded;
  std::uint64_t now_ms = 0;  // the monotonic clock (core/clock.hpp): ages, TTLs, ejections
  // Where the key came from ("header:x-session-id"); recorded with the session.
  std::string_view session_key_source;
  // When the request reached the gateway, on now_ms's clock (0: now_ms):
  // a session's think time ends there, not after an admission queue.
  std::uint64_t arrived_ms = 0;
};

// A session's key as a slot engine's holds name it (workers::SlotHolds;
// never 0).
[[nodiscard]] std::uint64_t slot_hold_key(std::string_view session_key);

struct RouteDecision {
  std::optional<std::size_t> worker;  // index into the model's workers; empty: nothing eligible
  policy::Reason reason = policy::Reason::no_eligible_worker;         // the decision log's reason
  policy::Reason policy_reason = policy::Reason::no_eligible_worker;  // what the policy said
  std::vector<policy::Candidate> candidates;                          // one per worker, configuration order
  std::uint32_t input_tokens = 0;
  // The chosen worker's cached tokens as the policy credited them (0 when
  // the worker is drifting) and as the index alone predicts them.
  std::uint32_t predicted_cached_tokens = 0;
  std::uint32_t indexed_cached_tokens = 0;
  // The most any eligible worker held of the prompt (as the policy
  // credited it): above predicted_cached_tokens, the decision chose to
  // compute the difference again (a move off a warmer worker).
  std::uint32_t best_cached_tokens = 0;
  // What one ms of work counted against the queue's one (cache_aware's
  // price of work, policy/work_price.hpp; negative: not a cost decision).
  double work_price = -1;
  // A hybrid model (full and local attention): what the full-attention
  // group alone would give, as routers that drop the local group predict.
  // Equal to indexed_cached_tokens on a full-attention model.
  std::uint32_t full_attention_cached_tokens = 0;
  // Of indexed_cached_tokens, those a lower tier holds (vLLM's CPU offload,
  // llama.cpp's host-RAM prompt cache) rather than the GPU or a slot.
  std::uint32_t offloaded_cached_tokens = 0;
  // A slot engine's session turn that continues its previous turn's slot
  // (policy/slot_reuse.hpp): that turn's prompt and answer tokens, which
  // the engine's figure for this one teaches the answer's reused share.
  // Set when the chosen worker is that slot's.
  struct Continuation {
    std::uint32_t previous_input_tokens = 0;
    std::uint32_t previous_answer_tokens = 0;
  };
  std::optional<Continuation> continuation;
  // The chosen worker's count of GPU blocks its engine reported evicting,
  // when decided: the outcome subtracts it to see whether evictions explain
  // a hit the index promised and the engine did not deliver.
  std::uint64_t evicted_blocks_at_decision = 0;
  // Uncached prompt tokens already dispatched to the chosen worker and not
  // yet answered: the queue this request joins (the prefill fit's input).
  std::uint64_t queued_tokens = 0;
  // Prompt tokens of the requests in flight there (decoding beside it).
  std::uint64_t active_tokens = 0;
  // The chosen worker had other requests in flight (this gateway's) or
  // waiting (its engine's report) when decided.
  bool worker_busy = false;
  // A slot engine whose slots are kept (held_slot_count): what losing the
  // slot's history costs the prompt's session there, computing it whole;
  // 0: not priced.
  double reprefill_ms = 0;
  // The chosen worker's KV-cache usage (0..1) as its engine last reported
  // it (vllm:kv_cache_usage_perc, sglang:token_usage); nullopt: unknown.
  std::optional<double> kv_usage;
  // The eligible worker that ranked second, and how much later its first
  // token was expected (ms; negative when the policy does not estimate it).
  std::optional<std::size_t> runner_up;
  double gap_ms = -1;
  // The session before this turn (empty: no key, or a key seen first now),
  // and its worker's position in the model (empty: not in it any more).
  std::optional<SessionState> session;
  std::optional<std::size_t> session_previous;
  // A disaggregated model: where the prefill runs (`worker` above is the
  // decoder), the alternatives' expected times and why.
  std::optional<policy::PrefillChoice> prefill;
  // The remote prefill worker, when there is one.
  [[nodiscard]] std::optional<std::size_t> prefill_worker() const { return prefill ? prefill->worker : std::nullopt; }
};

class Router {
 public:
  Router(SessionTable& sessions, SessionStats& stats) : sessions_(sessions), stats_(stats) {}

  // Set once before any I/O thread starts; null: no routing-time inserts.
  void set_index_writer(kv_events::IndexWriter* writer) { index_writer_ = writer; }
  // Set once before any I/O thread starts; null: no cluster (alone).
  void set_peer_publisher(PeerPublisher* publisher) { peers_ = publisher; }

  // `prompt` null: a request without prefix information (passthrough paths).
  [[nodiscard]] RouteDecision decide(const RoutingTable& table, const ModelRoute& model,
                                     const prompt::PreparedPrompt* prompt, const RouteContext& context) const;

  // Precondition: decision.worker is set, and `prompt` and `context` are
  // those the decision was made with. `table` (and its `model`) must
  // outlive the attempt; the prompt need not.
  [[nodiscard]] Attempt commit(const RoutingTable& table, const ModelRoute& model, const RouteDecision& decision,
                               const prompt::PreparedPrompt* prompt, const RouteContext& context);

 private:
  friend class Attempt;
  // `worker`: the attempt's decoder or its prefill worker.
  void withdraw(const Attempt& attempt, std::size_t worker);
  // A remote prefill answered: the decoder is about to hold the prompt.
  void assume_on_decoder(Attempt& attempt);
  // `reported_cached_tokens`: the engine's figure, when it said.
  void finish(const Attempt& attempt, std::optional<std::uint32_t> reported_cached_tokens = std::nullopt);
  // Attempt::engine_done of an answered request.
  void answer_read(const Attempt& attempt, const EngineAnswer& answer, std::uint64_t now_ms);
  // Into the worker's circuit breaker, under the model's ejection cap.
  void note_traffic(const Attempt& attempt, std::size_t worker, workers::FailureCause failure, std::uint64_t now_ms);
  void record_outcome(const Attempt& attempt, const ResponseOutcome& outcome);
  void record_prefill_outcome(const Attempt& attempt, std::optional<std::uint32_t> cached_tokens,
                              std::optional<std::uint32_t> prompt_tokens);

  SessionTable& sessions_;
  SessionStats& stats_;
  kv_events::IndexWriter* index_writer_ = nullptr;
  PeerPublisher* peers_ = nullptr;
};

// The most likely reason a worker's cache predictions drift, from what is
// known of it (what its engine says it is, its block size, how it is
// indexed), as one sentence naming the fix; the drift warning ends with it.
std::string likely_drift_cause(const ModelRoute& model, const WorkerRoute& worker);

// The x-kvgate-route receipt (README "Route receipt"):
//   worker=W; reason=R; predicted_cached=N[; runner_up=W2; gap_ms=G]
// No prompt content; worker ids are config strings.
std::string route_receipt(const ModelRoute& model, const RouteDecision& decision);

}  // namespace kvgate::route
