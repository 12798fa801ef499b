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
// worker. commit() applies a decision: the worker's in-flight and pending
// prefill accounting, the routing-time index insert, the session table.
// record_outcome() closes the loop when the response has ended: the
// engine's reported cached tokens against the prediction (drift) and the
// session's turn.
//
// Threading: every method may be called from any I/O thread or the admin
// thread at once (the session table locks a shard; the rest reads atomics
// and the index's lock-free lookups).
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "kvgate/kv_events/ingestion.hpp"
#include "kvgate/obs/metrics.hpp"
#include "kvgate/policy/policy.hpp"
#include "kvgate/prompt/prepared_prompt.hpp"
#include "kvgate/route/routing_table.hpp"
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
  std::uint64_t now_unix_ms = 0;
};

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
  // The chosen worker's count of GPU blocks its engine reported evicting,
  // when decided: the outcome subtracts it to see whether evictions explain
  // a hit the index promised and the engine did not deliver.
  std::uint64_t evicted_blocks_at_decision = 0;
  // Uncached prompt tokens already dispatched to the chosen worker and not
  // yet answered: the queue this request joins (the prefill fit's input).
  std::uint64_t queued_tokens = 0;
  // Prompt tokens of the requests in flight there (decoding beside it).
  std::uint64_t active_tokens = 0;
  // The eligible worker that ranked second, and how much later its first
  // token was expected (ms; negative when the policy does not estimate it).
  std::optional<std::size_t> runner_up;
  double gap_ms = -1;
  // The session before this turn (empty: no key, or a key seen first now).
  std::optional<SessionState> session;
  std::span<const prefix::BlockHash> blocks;  // inserted for the chosen worker on commit
};

// What a committed decision holds until the response ends.
struct Commitment {
  workers::InFlightRequest in_flight;
  std::uint64_t session_turn = 0;  // 0: no session key
  std::uint64_t ticket = 0;        // names the routing-time insert (withdraw)
};

class Router {
 public:
  Router(SessionTable& sessions, obs::Metrics& metrics) : sessions_(sessions), metrics_(metrics) {}

  // Set once before any I/O thread starts; null: no routing-time inserts.
  void set_ingestion(kv_events::Ingestion* ingestion) { ingestion_ = ingestion; }

  // `prompt` null: a request without prefix information (passthrough paths).
  [[nodiscard]] RouteDecision decide(const RoutingTable& table, const ModelRoute& model,
                                     const prompt::PreparedPrompt* prompt, const RouteContext& context) const;

  // Precondition: decision.worker is set.
  Commitment commit(const ModelRoute& model, const RouteDecision& decision, const RouteContext& context);

  // The committed attempt was not run by the engine: it answered an error
  // status before the first token (e.g. a prompt over its context length)
  // or the connection failed before any response byte. The routing-time
  // insert this attempt created is withdrawn, so the identical request is
  // not predicted a hit there next time. `blocks` as in the decision.
  void withdraw(const ModelRoute& model, std::size_t worker, std::span<const prefix::BlockHash> blocks,
                const Commitment& commitment);
  // The committed attempt ended on its worker (relayed whole, failed after
  // its first byte, or abandoned by the client). Only a worker that keeps
  // whole prompts in slots needs to know: its slot is free again.
  void finish(const ModelRoute& model, std::size_t worker, const Commitment& commitment);

  struct Outcome {
    int status = 0;
    std::uint32_t retries = 0;
    std::optional<std::uint32_t> cached_tokens;  // the engine's usage
    std::optional<std::uint32_t> prompt_tokens;
    std::optional<double> ttft_ms;
    // ttft_ms is the first streamed token (not the whole body of a
    // non-streaming answer): only then does it teach the prefill cost.
    bool first_token_streamed = false;
    std::optional<std::uint32_t> completion_tokens;  // the engine's usage
  };
  // The response to a committed decision has ended.
  void record_outcome(const RoutingTable& table, const ModelRoute& model, workers::WorkerState& worker,
                      const RouteDecision& decision, std::optional<std::string_view> session_key,
                      std::uint64_t session_turn, const Outcome& outcome);

 private:
  SessionTable& sessions_;
  obs::Metrics& metrics_;
  kv_events::Ingestion* ingestion_ = nullptr;
};

// The x-kvgate-route receipt (README "Route receipt"):
//   worker=W; reason=R; predicted_cached=N[; runner_up=W2; gap_ms=G]
// No prompt content; worker ids are config strings.
std::string route_receipt(const ModelRoute& model, const RouteDecision& decision);

}  // namespace kvgate::route
