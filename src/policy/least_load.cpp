#include "kvgate/policy/policy.hpp"

namespace kvgate::policy {
namespace {

// Picks the eligible worker with the fewest requests in flight, as counted by
// the gateway at dispatch and completion (not the engine's lagging metrics,
// so a burst spreads at once). Ties rotate (pick_best).
class LeastLoad final : public Policy {
 public:
  [[nodiscard]] std::string_view name() const override { return "least_load"; }

  [[nodiscard]] Decision decide(const RouteRequest& request, std::span<const WorkerView> workers) const override {
    return decide_least_load(request, workers, Reason::least_load);
  }
};

}  // namespace

Decision decide_least_load(const RouteRequest& request, std::span<const WorkerView> workers, Reason reason) {
  Decision decision;
  decision.candidates = filter_candidates(request, workers);
  for (auto& candidate : decision.candidates) {
    candidate.score = static_cast<double>(candidate.in_flight);
  }
  auto pick = pick_best(decision.candidates, request.tie_order(),
                        [](const Candidate& a, const Candidate& b) { return a.in_flight < b.in_flight; });
  decision.worker_index = pick.index;
  decision.reason = !pick.index ? Reason::no_eligible_worker : pick.eligible == 1 ? Reason::only_candidate : reason;
  return decision;
}

std::unique_ptr<Policy> make_least_load() {
  return std::make_unique<LeastLoad>();
}

}  // namespace kvgate::policy
