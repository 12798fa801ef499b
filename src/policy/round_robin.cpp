#include "kvgate/policy/policy.hpp"

namespace kvgate::policy {
namespace {

// Rotates over the eligible workers by the request sequence number, so a
// worker that is down or already tried shifts its turn to the next one.
class RoundRobin final : public Policy {
 public:
  [[nodiscard]] std::string_view name() const override { return "round_robin"; }

  [[nodiscard]] Decision decide(const RouteRequest& request, std::span<const WorkerView> workers) const override {
    Decision decision;
    decision.candidates = filter_candidates(request, workers);
    std::size_t eligible = 0;
    for (const auto& candidate : decision.candidates) {
      eligible += candidate.eligible ? 1 : 0;
    }
    if (eligible == 0) {
      decision.reason = Reason::no_eligible_worker;
      return decision;
    }
    // Score = how many turns until this worker is picked (0 = now): the
    // eligible workers in order, rotated by the sequence number.
    const auto first = static_cast<std::size_t>(request.sequence % eligible);
    std::size_t position = 0;
    for (std::size_t index = 0; index < decision.candidates.size(); ++index) {
      auto& candidate = decision.candidates[index];
      if (!candidate.eligible) {
        continue;
      }
      const auto rank = (position + eligible - first) % eligible;
      candidate.score = static_cast<double>(rank);
      if (rank == 0) {
        decision.worker_index = index;
      }
      ++position;
    }
    decision.reason = eligible == 1 ? Reason::only_candidate : Reason::round_robin;
    return decision;
  }
};

}  // namespace

std::unique_ptr<Policy> make_round_robin() {
  return std::make_unique<RoundRobin>();
}

}  // namespace kvgate::policy
