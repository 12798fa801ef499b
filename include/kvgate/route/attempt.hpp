#pragma once
// One committed try of a request on one worker, from Router::commit to the
// end of its response: the room that starts an attempt (route) also ends it.
// While it lives, an attempt holds everything the commit changed: the
// worker's in-flight and pending-prefill counts, the routing-time index
// insert (named by its ticket, with its own copy of the blocks), and the
// session's turn. The caller reports what happened, in order:
//
//   answering() / first_token()   the worker started answering
//   engine_done(now)              the worker's answer was read whole
//   end(how, traffic, now)        the try is over on the worker (now on the
//                                 monotonic clock): counts
//                                 released, the insert withdrawn when the
//                                 engine did not run the prompt, the
//                                 traffic outcome into the breaker
//   complete(outcome)             the response to the client has ended:
//                                 hit metrics, drift, learning, session turn
//
// An attempt destroyed without end() is withdrawn (the engine is assumed
// not to have run it); one ended and never completed records nothing more.
// Move-only; used by one thread at a time (the request's I/O thread).
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "kvgate/policy/reason.hpp"
#include "kvgate/prefix/block_hash.hpp"
#include "kvgate/workers/outlier_ejection.hpp"
#include "kvgate/workers/worker_state.hpp"

namespace kvgate::route {

class Router;
struct RoutingTable;
struct ModelRoute;

// How a try ended on its worker.
enum class AttemptEnd {
  // The engine ran the prompt (the answer was relayed whole, failed after
  // its first byte, or the client left): the blocks stay assumed.
  served,
  // The engine did not run it: an error status before the first token
  // (a prompt over the context length), or the connection failed before
  // any response byte. The routing-time insert is withdrawn.
  not_run,
};

// The engine's answer, read to its end.
struct EngineAnswer {
  int status = 0;
  std::optional<std::uint32_t> prompt_tokens;  // its usage
  std::optional<std::uint32_t> completion_tokens;
  std::optional<std::uint32_t> cached_tokens;
};

// What the response to a committed attempt turned out to be.
struct ResponseOutcome {
  int status = 0;
  std::uint32_t retries = 0;
  std::optional<std::uint32_t> cached_tokens;  // the engine's usage
  std::optional<std::uint32_t> prompt_tokens;
  std::optional<double> ttft_ms;
  // ttft_ms is the first streamed token (not the whole body of a
  // non-streaming answer): only then does it teach the prefill cost.
  bool first_token_streamed = false;
  std::optional<std::uint32_t> completion_tokens;  // the engine's usage
  std::optional<double> decode_ms;                 // the first token to the answer's end
  // A remotely prefilled request: the prefill worker's answer to the
  // decoder's first token (the KV's hand-over), in ms.
  std::optional<double> handover_ms;
};

class Attempt {
 public:
  Attempt(Attempt&& other) noexcept;  // the moved-from attempt owns nothing
  Attempt& operator=(Attempt&&) = delete;
  Attempt(const Attempt&) = delete;
  Attempt& operator=(const Attempt&) = delete;
  ~Attempt();

  [[nodiscard]] std::size_t worker_index() const { return worker_; }
  // The session turn this attempt committed (0: the request has no session key).
  [[nodiscard]] std::uint64_t session_turn() const { return session_turn_; }
  // A disaggregated request prefilled on another worker (the decision's
  // remote prefill): that worker's position in the model; empty otherwise.
  [[nodiscard]] std::optional<std::size_t> prefill_worker_index() const {
    return prefill_ ? std::optional(prefill_->worker) : std::nullopt;
  }
  // The prefill worker answered (the KV is ready to move) or failed (`how`
  // and `traffic` as for end()): its counts are released, its insert kept
  // or withdrawn. end() ends a prefill leg still open as served.
  void end_prefill(AttemptEnd how, std::optional<workers::FailureCause> traffic, std::uint64_t now_ms);
  // The prefill worker's usage (its cached tokens against the decision's
  // prediction for it: the drift check of a remotely prefilled request,
  // whose decoder reports the moved KV as cached).
  void prefill_answered(std::optional<std::uint32_t> cached_tokens, std::optional<std::uint32_t> prompt_tokens);

  // A non-streamed answer's header, or a stream's first event.
  void answering() { in_flight_.answering(); }
  void first_token(double seconds_since_dispatch) { in_flight_.first_token(seconds_since_dispatch); }
  // The worker's answer was read to its end: the worker is done with it,
  // whatever the client still has to receive. An answered request (status
  // 200) also frees its slot on a slot engine and leaves its length on its
  // session here, not at end(): the client may send its next turn as soon
  // as it has the last byte, and that turn's decision must find both.
  void engine_done(std::uint64_t now_ms, const EngineAnswer& answer = {});

  // `traffic`: what the try tells the worker's circuit breaker (none: an
  // answer that was not the worker's failure); nullopt: the try never
  // reached the worker (the client left first), which tells it nothing.
  void end(AttemptEnd how, std::optional<workers::FailureCause> traffic, std::uint64_t now_ms);
  void complete(const ResponseOutcome& outcome);

 private:
  friend class Router;
  // What the decision predicted, compared with the outcome.
  struct Prediction {
    policy::Reason reason = policy::Reason::no_eligible_worker;
    std::uint32_t input_tokens = 0;
    std::uint32_t indexed_cached_tokens = 0;
    std::uint32_t offloaded_cached_tokens = 0;
    std::uint64_t evicted_blocks_at_decision = 0;
    std::uint64_t queued_tokens = 0;
    std::uint64_t active_tokens = 0;
    bool worker_busy = false;
    // The chosen candidate's expected first token (< 0: the policy prices
    // none) and, for a request naming a LoRA adapter, the adapter load
    // priced in it (< 0: not priced).
    double expected_ttft_ms = -1;
    double adapter_load_ms = -1;
    // A slot engine's slots (0: none modelled), the requests that were
    // ahead of a free slot, and the queue priced in the expected TTFT.
    std::uint32_t slots = 0;
    std::uint32_t requests_ahead = 0;
    double queue_delay_ms = 0;
    double slot_forecast_ms = 0;  // of the queue, the slot forecast before its correction
    double reprefill_ms = 0;      // RouteDecision::reprefill_ms
    // A session turn that moved: the previous worker's expected TTFT,
    // calibrated (< 0: not a move, or not priced).
    double stay_expected_ttft_ms = -1;
    // The prompt's KV moved from a prefill worker: the decoder's usage
    // counts it as cached, so the decoder's figure teaches nothing.
    bool remote_prefill = false;
    std::uint32_t moved_tokens = 0;  // what the decoder lacked
    // A slot engine's turn that continued its previous turn's slot
    // (RouteDecision::continuation): that turn's prompt and answer tokens.
    bool continued = false;
    std::uint32_t continued_input_tokens = 0;
    std::uint32_t continued_answer_tokens = 0;
  };
  Attempt(Router& router, const RoutingTable& table, const ModelRoute& model, std::size_t worker,
          workers::InFlightRequest in_flight);

  Router* router_;  // null once moved from
  const RoutingTable* table_;
  const ModelRoute* model_;
  std::size_t worker_;
  workers::InFlightRequest in_flight_;
  Prediction prediction_;
  std::uint64_t ticket_ = 0;        // names the routing-time insert
  std::uint64_t session_turn_ = 0;  // 0: no session key
  std::string session_key_;
  std::vector<prefix::BlockHash> blocks_;  // inserted for the worker on commit
  // The remote prefill of a disaggregated request (Router::commit).
  struct PrefillLeg {
    std::size_t worker = 0;
    workers::InFlightRequest in_flight;
    std::uint32_t predicted_cached_tokens = 0;  // what the index gave the prefill worker
    bool ended = false;
  };
  std::optional<PrefillLeg> prefill_;
  // A slot engine: how long the request waited for and held its slot
  // (workers::SlotOccupancy), from the first finish that knew them.
  workers::SlotOccupancy::Times slot_times_;
  void keep_slot_times(const workers::SlotOccupancy::Times& times) {
    if (times.hold_ms) {
      slot_times_ = times;
    }
  }
  bool decoder_assumed_ = false;  // the blocks are inserted for worker_
  bool ended_ = false;
  bool completed_ = false;
  bool slot_freed_ = false;  // engine_done freed the slot end() would
};

}  // namespace kvgate::route
