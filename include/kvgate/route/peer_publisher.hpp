#pragma once
// What the router tells the other kvgate replicas of a cluster, as an
// interface (cluster/ implements it over Redis; alone, there is none): the
// session turns it commits and completes, the routing-time inserts it
// makes and withdraws, the slots it frees, what its answers taught of the
// workers' costs, how long each session's answer was. The router calls it from the
// request's I/O thread beside the local change it mirrors. Every call must
// return at once, never wait for the engine and, once warm, not allocate:
// what cannot be queued is dropped and counted by the implementation.
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>

#include "kvgate/policy/reason.hpp"
#include "kvgate/route/cost_sample.hpp"
#include "kvgate/route/session_table.hpp"

namespace kvgate::route {

// A committed turn, as the peers need it (views of the router's own state).
struct PeerTurn {
  std::uint64_t number = 0;  // the number this replica gave it
  std::string_view worker;
  std::string_view prefill_worker;  // empty: prefilled on `worker`
  policy::Reason reason = policy::Reason::new_session;
  std::optional<policy::Reason> prefill;
  std::uint32_t input_tokens = 0;
  std::uint32_t predicted_cached_tokens = 0;
  std::optional<double> kv_usage;
};

class PeerPublisher {
 public:
  PeerPublisher() = default;
  PeerPublisher(const PeerPublisher&) = delete;
  PeerPublisher& operator=(const PeerPublisher&) = delete;
  virtual ~PeerPublisher() = default;

  // `retry`: it replaces the session's last turn.
  virtual void turn(std::string_view model, std::string_view key, std::string_view key_source, const PeerTurn& turn,
                    bool retry) = 0;
  virtual void outcome(std::string_view model, std::string_view key, std::uint64_t number,
                       const SessionTable::Outcome& outcome) = 0;
  // The index writer's assume, withdraw and finish (kv_events/index_writer.hpp),
  // by model name and worker id; `ticket` is this replica's own numbering.
  virtual void assumed(std::string_view model, std::string_view worker, std::span<const std::uint64_t> blocks,
                       std::uint64_t ticket) = 0;
  virtual void withdrawn(std::string_view model, std::string_view worker, std::span<const std::uint64_t> blocks,
                         std::uint64_t ticket) = 0;
  virtual void finished(std::string_view model, std::string_view worker, std::uint64_t ticket) = 0;
  // A clean answer's cost sample (route/cost_sample.hpp), which the
  // router has learned from itself.
  virtual void learned(std::string_view model, std::string_view worker, const CostSample& sample) = 0;
  // Turn `number` of session `key` was answered whole, its engine having
  // generated `answer_tokens` (when it said): SessionTable::record_answer.
  virtual void answered(std::string_view key, std::uint64_t number, std::optional<std::uint32_t> answer_tokens) = 0;
};

}  // namespace kvgate::route
