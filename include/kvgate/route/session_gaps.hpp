#pragma once
// One model's conversations in time: the gaps between a session's turns
// (request to request, as the session table sees them) and how many turns
// started a session, from which cache_aware's eviction term learns how
// likely an idle conversation comes back (policy::ReturnModel); and the
// think times (a turn's answer read whole to the session's next turn),
// from which a slot engine's freed slot is kept for its conversation or
// not (policy/slot_hold.hpp).
//
// Threading: any I/O thread records, any thread reads; relaxed atomics, no
// lock. The counts halve once the turns reach kHalveAt, so the model follows
// a day's changing traffic (a halving racing an increment may lose that
// one count: an estimate).
#include <array>
#include <atomic>
#include <cstdint>

#include "kvgate/policy/eviction.hpp"

namespace kvgate::route {

class SessionGaps {
 public:
  static constexpr std::uint64_t kHalveAt = 1u << 16;

  // A turn that starts a session (no earlier turn, or idle past idle_ttl).
  void record_first_turn();
  // A turn `gap_ms` after the session's previous one.
  void record_next_turn(std::uint64_t gap_ms);
  // ... and `think_ms` after that turn's answer was read whole.
  void record_think(std::uint64_t think_ms);

  struct Counts {
    policy::AgeHistogram gaps{};
    policy::AgeHistogram think{};
    std::uint64_t turns = 0;
    std::uint64_t sessions = 0;
  };
  [[nodiscard]] Counts counts() const;
  [[nodiscard]] policy::ReturnModel model() const;
  // The same over think times: whether a conversation comes back within h
  // of its answer.
  [[nodiscard]] policy::ReturnModel think_model() const;

 private:
  void count_turn();

  std::array<std::atomic<std::uint64_t>, policy::kAgeBuckets> gaps_{};
  std::array<std::atomic<std::uint64_t>, policy::kAgeBuckets> think_{};
  std::atomic<std::uint64_t> turns_{0};
  std::atomic<std::uint64_t> sessions_{0};
};

}  // namespace kvgate::route
