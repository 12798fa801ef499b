#include <algorithm>
#include <limits>

#include "kvgate/policy/policy.hpp"

// Re-implementations of the routers a user would install instead of
// kvgate, on kvgate's inputs (README.md in this folder).

namespace kvgate::policy {
namespace {

class DynamoCost final : public Policy {
 public:
  explicit DynamoCost(DynamoCostOptions options) : options_(options) {}

  [[nodiscard]] std::string_view name() const override { return "dynamo_cost"; }

  [[nodiscard]] Decision decide(const RouteRequest& request, std::span<const WorkerView> workers) const override {
    Decision decision;
    decision.candidates = filter_candidates(request, workers);
    for (std::size_t index = 0; index < workers.size(); ++index) {
      const auto& worker = workers[index];
      auto& candidate = decision.candidates[index];
      // Dynamo's indexer drops the KV events of non-full-attention groups.
      const auto cached =
          std::min(worker.full_attention_cached_tokens.value_or(worker.cached_tokens), request.input_tokens);
      candidate.cached_tokens = cached;
      const double prefill =
          static_cast<double>(request.input_tokens - cached) + static_cast<double>(worker.pending_prefill_tokens);
      // The request's own decode blocks are the same on every worker; its
      // prefill and the load already there are what differ.
      candidate.score = options_.overlap_weight * prefill + static_cast<double>(worker.active_tokens);
    }
    auto pick = pick_best(decision.candidates, request.tie_order(),
                          [](const Candidate& a, const Candidate& b) { return a.score < b.score; });
    decision.worker_index = pick.index;
    decision.reason = cost_pick_reason(pick, decision.candidates);
    return decision;
  }

 private:
  DynamoCostOptions options_;
};

class SglangCacheAware final : public Policy {
 public:
  explicit SglangCacheAware(SglangCacheAwareOptions options) : options_(options) {}

  [[nodiscard]] std::string_view name() const override { return "sglang_cache_aware"; }

  [[nodiscard]] Decision decide(const RouteRequest& request, std::span<const WorkerView> workers) const override {
    Decision decision;
    decision.candidates = filter_candidates(request, workers);
    std::uint32_t lowest_load = std::numeric_limits<std::uint32_t>::max();
    std::uint32_t highest_load = 0;
    std::uint32_t longest_match = 0;
    for (std::size_t index = 0; index < workers.size(); ++index) {
      auto& candidate = decision.candidates[index];
      // SGLang's radix tree keys tokens only: no sliding-window group.
      candidate.cached_tokens = std::min(
          workers[index].full_attention_cached_tokens.value_or(workers[index].cached_tokens), request.input_tokens);
      if (!candidate.eligible) {
        continue;
      }
      lowest_load = std::min(lowest_load, candidate.in_flight);
      highest_load = std::max(highest_load, candidate.in_flight);
      longest_match = std::max(longest_match, candidate.cached_tokens);
    }
    const bool imbalanced =
        highest_load - std::min(lowest_load, highest_load) > options_.balance_abs_threshold &&
        static_cast<double>(highest_load) > options_.balance_rel_threshold * static_cast<double>(lowest_load);
    const double match_rate = request.input_tokens == 0
                                  ? 0.0
                                  : static_cast<double>(longest_match) / static_cast<double>(request.input_tokens);
    Reason reason = Reason::smallest_cache;
    if (imbalanced) {
      reason = Reason::imbalanced;
      for (std::size_t index = 0; index < workers.size(); ++index) {
        decision.candidates[index].score = static_cast<double>(decision.candidates[index].in_flight);
      }
    } else if (longest_match > 0 && match_rate > options_.cache_threshold) {
      reason = Reason::prefix_match;
      for (std::size_t index = 0; index < workers.size(); ++index) {
        // Longest match first; among equals the less loaded.
        decision.candidates[index].score = -static_cast<double>(decision.candidates[index].cached_tokens) +
                                           static_cast<double>(decision.candidates[index].in_flight) * 1e-6;
      }
    } else {
      for (std::size_t index = 0; index < workers.size(); ++index) {
        decision.candidates[index].score = static_cast<double>(workers[index].indexed_blocks);
      }
    }
    auto pick = pick_best(decision.candidates, request.tie_order(),
                          [](const Candidate& a, const Candidate& b) { return a.score < b.score; });
    decision.worker_index = pick.index;
    decision.reason = !pick.index ? Reason::no_eligible_worker : pick.eligible == 1 ? Reason::only_candidate : reason;
    return decision;
  }

 private:
  SglangCacheAwareOptions options_;
};

}  // namespace

std::unique_ptr<Policy> make_dynamo_cost(DynamoCostOptions options) {
  return std::make_unique<DynamoCost>(options);
}

std::unique_ptr<Policy> make_sglang_cache_aware(SglangCacheAwareOptions options) {
  return std::make_unique<SglangCacheAware>(options);
}

}  // namespace kvgate::policy
