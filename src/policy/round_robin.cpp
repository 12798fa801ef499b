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
    std::vector<std::size_t> eligible;
    for (std::size_t index = 0; index < decision.candidates.size(); ++index) {
      if (decision.candidates[index].eligible) {
        eligible.push_back(index);
      }
    }
    if (eligible.empty()) {
      decision.reason = "no_eligible_worker";
      return decision;
    }
    auto chosen = eligible[request.sequence % eligible.size()];
    for (std::size_t rank = 0; rank < eligible.size(); ++rank) {
      // Score = how many turns until this worker is picked (0 = now).
      auto index = eligible[(request.sequence + rank) % eligible.size()];
      decision.candidates[index].score = static_cast<double>(rank);
    }
    decision.worker_index = chosen;
    decision.reason = eligible.size() == 1 ? "only_candidate" : "round_robin";
    return decision;
  }
};

}  // namespace

std::unique_ptr<Policy> make_round_robin() {
  return std::make_unique<RoundRobin>();
}

}  // namespace kvgate::policy
