#include <limits>

#include "kvgate/policy/policy.hpp"

namespace kvgate::policy {
namespace {

// Picks the eligible worker with the fewest requests in flight, as counted by
// the gateway at dispatch and completion (not the engine's lagging metrics,
// so a burst spreads at once). Ties rotate by sequence number so equal
// workers share the load instead of the first one taking every tie.
class LeastLoad final : public Policy {
 public:
  [[nodiscard]] std::string_view name() const override { return "least_load"; }

  [[nodiscard]] Decision decide(const RouteRequest& request, std::span<const WorkerView> workers) const override {
    Decision decision;
    decision.candidates = filter_candidates(request, workers);
    const auto count = decision.candidates.size();
    std::optional<std::size_t> best;
    std::size_t eligible = 0;
    for (std::size_t offset = 0; offset < count; ++offset) {
      auto index = (request.sequence + offset) % count;
      auto& candidate = decision.candidates[index];
      if (!candidate.eligible) {
        continue;
      }
      ++eligible;
      candidate.score = static_cast<double>(candidate.in_flight);
      if (!best || candidate.in_flight < decision.candidates[*best].in_flight) {
        best = index;
      }
    }
    decision.worker_index = best;
    decision.reason = !best ? "no_eligible_worker" : eligible == 1 ? "only_candidate" : "least_load";
    return decision;
  }
};

}  // namespace

std::unique_ptr<Policy> make_least_load() {
  return std::make_unique<LeastLoad>();
}

}  // namespace kvgate::policy
