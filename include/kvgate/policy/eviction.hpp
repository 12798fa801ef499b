#pragma once
// What a placement destroys (cache_aware's eviction term; the routing study
// in ../shared/docs/routing-study.md, section 7, found it the largest single
// gain near the cache-thrashing cliff). A worker whose KV memory is full
// stores a request's new blocks by evicting its least recently used ones
// (vLLM's free-block queue, SGLang's radix-tree LRU). Evicting a block costs
// its re-prefill if the conversation that last used it comes back before
// the block would have aged out anyway; that chance is learned from the
// sessions' inter-turn gaps (ReturnModel).
//
// Pure values: the index writer summarises each worker's blocks by idle age
// (LruProfile), the router learns the gaps per model, and the policy prices
// a placement with eviction_cost(). No clocks: ages come in as numbers.
#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>

namespace kvgate::policy {

// Idle ages on a log2 scale: bucket 0 holds ages below kAgeBucketBaseMs,
// bucket k >= 1 ages in [base * 2^(k-1), base * 2^k), the last bucket
// everything older. 100 ms resolves the sub-second gaps of agents' tool
// loops; 20 buckets reach 2^18 x 100 ms (7.3 h) before the last one.
inline constexpr std::size_t kAgeBuckets = 20;
inline constexpr double kAgeBucketBaseMs = 100;

[[nodiscard]] std::size_t age_bucket(double age_ms);
// The bucket's lower edge (0 for bucket 0) and a representative age inside
// it (its geometric middle; half the base for bucket 0).
[[nodiscard]] double age_bucket_low_ms(std::size_t bucket);
[[nodiscard]] double age_bucket_typical_ms(std::size_t bucket);

// Counts per age bucket.
using AgeHistogram = std::array<std::uint64_t, kAgeBuckets>;

// One worker's GPU-resident blocks by how long since a request last used
// them (the order its engine evicts in), as the index writer last published
// them.
struct LruProfile {
  AgeHistogram blocks{};
  // Blocks the index says the worker holds on the GPU (events plus
  // routing-time assumptions: the requests dispatched and not yet stored
  // are in it) and what its KV memory holds (0: unknown, no term).
  std::uint64_t held_blocks = 0;
  std::uint64_t capacity_blocks = 0;
  // How long ago the ages were taken: every age is this much older now.
  double age_offset_ms = 0;
};

// How likely a conversation idle for t comes back within a horizon h:
//   P = q (F(t + h) - F(t)) / (q (1 - F(t)) + 1 - q)
// F: the distribution of the gaps between a session's turns (request to
// request); q: the share of turns that were followed by another (so a
// session idle for t either is still going, weight q (1 - F(t)), or has
// ended, weight 1 - q). The routing study's form (section 7, item 5).
class ReturnModel {
 public:
  // Fewer gaps than this and the model says 0: an unlearned eviction term
  // stays out of the score rather than guess.
  static constexpr std::uint64_t kMinGaps = 32;

  ReturnModel() = default;
  // `gaps`: inter-turn gaps per age bucket; `turns`: turns seen; `sessions`:
  // sessions that started (their first turn had no predecessor).
  ReturnModel(const AgeHistogram& gaps, std::uint64_t turns, std::uint64_t sessions);

  [[nodiscard]] bool learned() const { return learned_; }
  [[nodiscard]] double continuation() const { return continuation_; }
  [[nodiscard]] double gap_cdf(double age_ms) const;
  [[nodiscard]] double probability(double idle_ms, double horizon_ms) const;

 private:
  // F at each bucket's lower edge; cdf_[kAgeBuckets] = 1.
  std::array<double, kAgeBuckets + 1> cdf_{};
  double continuation_ = 0;
  bool learned_ = false;
};

struct EvictionCost {
  double ms = 0;             // expected re-prefill of what the placement evicts
  std::uint64_t blocks = 0;  // blocks it evicts (whatever their owners' odds)
  double horizon_ms = 0;     // the worker's cache residency used as the horizon
};

// The blocks a prompt stores on a worker: its full blocks, less those the
// worker already holds. The full blocks alone are what any placement can
// store at most; the router reads a worker's ages only where that many do
// not fit its free room.
[[nodiscard]] inline std::uint64_t full_prompt_blocks(std::uint64_t input_tokens, std::uint64_t block_size) {
  return block_size > 0 ? input_tokens / block_size : 0;
}

// The blocks `new_blocks` more would evict on a worker described by `lru`,
// oldest first, after the ones the requests already dispatched there will
// evict (`held_blocks` beyond capacity), each priced `ms_per_block` times the
// chance its owner returns within the worker's residency time (the age of
// its oldest blocks). `own_blocks` of the request's own prefix sit on the
// worker with idle age `own_idle_ms` (its session's gap, when known): the
// placement reuses them, so they are not among the evicted.
[[nodiscard]] EvictionCost eviction_cost(const LruProfile& lru, std::uint64_t new_blocks, std::uint64_t own_blocks,
                                         std::optional<double> own_idle_ms, const ReturnModel& returns,
                                         double ms_per_block);

// How much of a prefix the worker holds will still be there when the
// request gets its turn: the requests already dispatched there store their
// new blocks first (`held_blocks` beyond capacity), evicting the oldest
// idle blocks, and a prefix idle for `own_idle_ms` (its session's gap) goes
// once those older than it are gone; within its age bucket it goes in
// proportion to its share of the bucket, tail first (the engines free a
// request's blocks tail first), so what survives is a shorter prefix.
// `own_blocks`: the prefix's blocks on the GPU; returns how many survive.
// Everything survives on a worker whose dispatched requests fit its memory,
// whose capacity is unknown, or whose ages are not read (no order to evict
// in: the index writer has not published them, or the eviction term is off).
[[nodiscard]] std::uint64_t surviving_blocks(const LruProfile& lru, std::uint64_t own_blocks, double own_idle_ms);

}  // namespace kvgate::policy
