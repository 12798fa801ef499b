#pragma once
// One model's conversations in time: the gaps between a session's turns
// (request to request, as the session table sees them) and how many turns
// started a session, from which cache_aware's eviction term learns how
// likely an idle conversation comes back (policy::ReturnModel).
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

  struct Counts {
    policy::AgeHistogram gaps{};
    std::uint64_t turns = 0;
    std::uint64_t sessions = 0;
  };
  [[nodiscard]] Counts counts() const;
  [[nodiscard]] policy::ReturnModel model() const;

 private:
  void count_turn();

  std::array<std::atomic<std::uint64_t>, policy::kAgeBuckets> gaps_{};
  std::atomic<std::uint64_t> turns_{0};
  std::atomic<std::uint64_t> sessions_{0};
};

}  // namespace kvgate::route
