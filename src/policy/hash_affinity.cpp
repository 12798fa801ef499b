#include <xxhash.h>

#include "kvgate/policy/policy.hpp"

// Affinity by hashing, the way most gateways do it before they look at any
// cache: a key (the session, or the prompt's first blocks) picks a worker by
// rendezvous hashing (highest random weight: every worker gets the score
// hash(key, worker id), the highest eligible score wins). When a worker
// leaves or goes unhealthy only its own keys move, each to its next-highest
// worker; adding one moves about 1/n of the keys. Requests without a key
// go to the least loaded worker.

namespace kvgate::policy {
namespace {

std::uint64_t rendezvous_score(std::uint64_t key, std::string_view worker_id) {
  return XXH3_64bits_withSeed(worker_id.data(), worker_id.size(), key);
}

// Fills each candidate's score (lower is better, like every policy: the
// negated rendezvous weight, as a double only for display) and picks.
Decision pick_by_key(const RouteRequest& request, std::span<const WorkerView> workers, std::uint64_t key,
                     Reason keyed_reason) {
  Decision decision;
  decision.candidates = filter_candidates(request, workers);
  std::optional<std::size_t> best;
  std::optional<std::size_t> top_overall;  // ignoring eligibility: where the key belongs
  std::uint64_t best_score = 0;
  std::uint64_t top_score = 0;
  std::size_t eligible = 0;
  for (std::size_t index = 0; index < workers.size(); ++index) {
    const auto score = rendezvous_score(key, workers[index].id);
    decision.candidates[index].score = -static_cast<double>(score >> 11);  // 53 bits survive the conversion
    if (!top_overall || score > top_score) {
      top_overall = index;
      top_score = score;
    }
    if (!decision.candidates[index].eligible) {
      continue;
    }
    ++eligible;
    if (!best || score > best_score) {
      best = index;
      best_score = score;
    }
  }
  decision.worker_index = best;
  if (!best) {
    decision.reason = Reason::no_eligible_worker;
  } else if (best != top_overall) {
    // The key's own worker is unhealthy or already failed this request.
    decision.reason = decision.candidates[*top_overall].ineligible_because == Ineligible::already_tried
                          ? Reason::retry
                          : Reason::worker_unhealthy;
  } else {
    decision.reason = eligible == 1 ? Reason::only_candidate : keyed_reason;
  }
  return decision;
}

class SessionHash final : public Policy {
 public:
  [[nodiscard]] std::string_view name() const override { return "session_hash"; }

  [[nodiscard]] Decision decide(const RouteRequest& request, std::span<const WorkerView> workers) const override {
    if (!request.session_key) {
      return decide_least_load(request, workers, Reason::no_session);
    }
    const auto key = XXH3_64bits(request.session_key->data(), request.session_key->size());
    return pick_by_key(request, workers, key, Reason::sticky);
  }
};

class PrefixHash final : public Policy {
 public:
  explicit PrefixHash(std::uint32_t prefix_blocks) : prefix_blocks_(prefix_blocks) {}
  [[nodiscard]] std::string_view name() const override { return "prefix_hash"; }

  [[nodiscard]] Decision decide(const RouteRequest& request, std::span<const WorkerView> workers) const override {
    if (request.prompt_blocks.empty()) {
      return decide_least_load(request, workers, Reason::no_full_block);
    }
    // The hashes are chained, so the last one of the prefix stands for all.
    const auto depth = std::min<std::size_t>(prefix_blocks_, request.prompt_blocks.size());
    return pick_by_key(request, workers, request.prompt_blocks[depth - 1], Reason::prefix_affinity);
  }

 private:
  std::uint32_t prefix_blocks_;
};

}  // namespace

std::unique_ptr<Policy> make_session_hash() {
  return std::make_unique<SessionHash>();
}

std::unique_ptr<Policy> make_prefix_hash(std::uint32_t prefix_blocks) {
  return std::make_unique<PrefixHash>(prefix_blocks == 0 ? 1 : prefix_blocks);
}

}  // namespace kvgate::policy
