#include <algorithm>

#include "kvgate/policy/policy.hpp"

namespace kvgate::policy {

Ineligible ineligibility(const RouteRequest& request, const WorkerView& worker, std::size_t index, bool to_decode) {
  if (std::find(request.excluded.begin(), request.excluded.end(), index) != request.excluded.end()) {
    return Ineligible::already_tried;
  }
  if (!worker.healthy) {
    return Ineligible::unhealthy;
  }
  if (worker.ejected) {
    return Ineligible::ejected;
  }
  if (to_decode && !worker.decodes) {
    return Ineligible::prefill_only;
  }
  if (worker.at_capacity) {
    return Ineligible::at_capacity;
  }
  return Ineligible::none;
}

std::vector<Candidate> filter_candidates(const RouteRequest& request, std::span<const WorkerView> workers) {
  std::vector<Candidate> candidates;
  candidates.reserve(workers.size());
  for (std::size_t index = 0; index < workers.size(); ++index) {
    const auto& worker = workers[index];
    Candidate candidate;
    candidate.worker = worker.id;
    candidate.drifting = worker.drifting;
    candidate.in_flight = worker.in_flight;
    candidate.cached_tokens = worker.cached_tokens;
    candidate.indexed_blocks = worker.indexed_blocks;
    candidate.adapter = worker.adapter;  // whatever prices it: the operator sees where adapters land
    candidate.ineligible_because = ineligibility(request, worker, index, true);
    candidate.eligible = candidate.ineligible_because == Ineligible::none;
    candidates.push_back(candidate);
  }
  return candidates;
}

Reason cost_pick_reason(const Pick& pick, const std::vector<Candidate>& candidates) {
  if (!pick.index) {
    return Reason::no_eligible_worker;
  }
  if (pick.eligible == 1) {
    return Reason::only_candidate;
  }
  return candidates[*pick.index].cached_tokens > 0 ? Reason::best_cost : Reason::best_cost_no_cache;
}

}  // namespace kvgate::policy
