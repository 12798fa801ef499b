#include "kvgate/policy/policy.hpp"

namespace kvgate::policy {
namespace {

// Sends the request where its expected time to first token is lowest:
//   expected_ttft = queue_delay + prefill
//   prefill       = (input_tokens - cached_tokens) * prefill_ms_per_token
//   queue_delay   = pending_prefill_tokens * queue_ms_per_pending_token
//                 + in_flight * queue_ms_per_request
//                 + engine_waiting * queue_ms_per_waiting_request
// A worker that holds the conversation's earlier turns wins while its
// saving outweighs its queue; when it is busy enough, another worker's
// shorter queue wins even though it must prefill everything (affinity is
// broken when it stops paying). Ties go to the worker with fewer requests
// in flight, then rotate (pick_best).
class CacheAware final : public Policy {
 public:
  explicit CacheAware(CostModel cost) : cost_(cost) {}

  [[nodiscard]] std::string_view name() const override { return "cache_aware"; }

  [[nodiscard]] Decision decide(const RouteRequest& request, std::span<const WorkerView> workers) const override {
    Decision decision;
    decision.candidates = filter_candidates(request, workers);
    for (std::size_t index = 0; index < workers.size(); ++index) {
      score(request, workers[index], decision.candidates[index]);
    }
    auto pick = pick_best(decision.candidates, request.sequence, better);
    decision.worker_index = pick.index;
    decision.reason = cost_pick_reason(pick, decision.candidates);
    return decision;
  }

 private:
  void score(const RouteRequest& request, const WorkerView& worker, Candidate& candidate) const {
    auto cached = std::min(worker.cached_tokens, request.input_tokens);
    candidate.cached_tokens = cached;
    candidate.prefill_ms = static_cast<double>(request.input_tokens - cached) * cost_.prefill_ms_per_token;
    const bool engine_fresh =
        worker.engine_snapshot_age_ms >= 0 && worker.engine_snapshot_age_ms <= cost_.engine_snapshot_max_age_ms;
    const double engine_waiting = engine_fresh ? static_cast<double>(worker.engine_waiting) : 0.0;
    candidate.queue_delay_ms = static_cast<double>(worker.pending_prefill_tokens) * cost_.queue_ms_per_pending_token +
                               static_cast<double>(worker.in_flight) * cost_.queue_ms_per_request +
                               engine_waiting * cost_.queue_ms_per_waiting_request;
    candidate.expected_ttft_ms = candidate.queue_delay_ms + candidate.prefill_ms;
    candidate.score = candidate.expected_ttft_ms;
  }

  static bool better(const Candidate& candidate, const Candidate& best) {
    if (candidate.score != best.score) {
      return candidate.score < best.score;
    }
    return candidate.in_flight < best.in_flight;
  }

  CostModel cost_;
};

}  // namespace

std::unique_ptr<Policy> make_cache_aware(CostModel cost) {
  return std::make_unique<CacheAware>(cost);
}

}  // namespace kvgate::policy
