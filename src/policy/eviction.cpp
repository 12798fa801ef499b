#include "kvgate/policy/eviction.hpp"

#include <algorithm>
#include <cmath>

namespace kvgate::policy {

std::size_t age_bucket(double age_ms) {
  if (!(age_ms >= kAgeBucketBaseMs)) {  // also NaN and negative ages
    return 0;
  }
  const auto bucket = static_cast<std::size_t>(std::floor(std::log2(age_ms / kAgeBucketBaseMs))) + 1;
  return std::min(bucket, kAgeBuckets - 1);
}

double age_bucket_low_ms(std::size_t bucket) {
  return bucket == 0 ? 0.0 : std::ldexp(kAgeBucketBaseMs, static_cast<int>(bucket) - 1);
}

double age_bucket_typical_ms(std::size_t bucket) {
  return bucket == 0 ? kAgeBucketBaseMs / 2 : age_bucket_low_ms(bucket) * std::sqrt(2.0);
}

ReturnModel::ReturnModel(const AgeHistogram& gaps, std::uint64_t turns, std::uint64_t sessions) {
  std::uint64_t total = 0;
  for (auto count : gaps) {
    total += count;
  }
  if (total < kMinGaps || turns == 0) {
    return;
  }
  double below = 0;
  for (std::size_t bucket = 0; bucket < kAgeBuckets; ++bucket) {
    cdf_[bucket] = below / static_cast<double>(total);
    below += static_cast<double>(gaps[bucket]);
  }
  cdf_[kAgeBuckets] = 1;
  // A session's turns beyond its first are the continuations. Counts are
  // kept by concurrent threads without a common lock: clamp.
  const auto continued = turns > sessions ? turns - sessions : 0;
  continuation_ = std::clamp(static_cast<double>(continued) / static_cast<double>(turns), 0.0, 1.0);
  learned_ = true;
}

// Linear inside bucket 0, linear in log2(age) inside the others; the last
// bucket is taken to end at twice its lower edge.
double ReturnModel::gap_cdf(double age_ms) const {
  if (!learned_ || !(age_ms > 0)) {
    return 0;
  }
  const auto bucket = age_bucket(age_ms);
  const double low = cdf_[bucket];
  const double high = cdf_[bucket + 1];
  double within = 0;
  if (bucket == 0) {
    within = age_ms / kAgeBucketBaseMs;
  } else {
    within = std::log2(age_ms / age_bucket_low_ms(bucket));
  }
  return low + (high - low) * std::clamp(within, 0.0, 1.0);
}

double ReturnModel::probability(double idle_ms, double horizon_ms) const {
  if (!learned_ || continuation_ <= 0) {
    return 0;
  }
  const double survived = gap_cdf(idle_ms);
  const double returns = continuation_ * (gap_cdf(idle_ms + std::max(horizon_ms, 0.0)) - survived);
  const double alive = continuation_ * (1 - survived) + (1 - continuation_);
  return alive > 0 ? std::clamp(returns / alive, 0.0, 1.0) : 0.0;
}

EvictionCost eviction_cost(const LruProfile& lru, std::uint64_t new_blocks, std::uint64_t own_blocks,
                           std::optional<double> own_idle_ms, const ReturnModel& returns, double ms_per_block) {
  EvictionCost cost;
  if (lru.capacity_blocks == 0 || new_blocks == 0) {
    return cost;
  }
  const auto free_blocks = lru.capacity_blocks > lru.held_blocks ? lru.capacity_blocks - lru.held_blocks : 0;
  if (new_blocks <= free_blocks) {
    return cost;
  }
  cost.blocks = new_blocks - free_blocks;
  // What the requests already dispatched there will evict before this one.
  auto ahead = lru.held_blocks > lru.capacity_blocks ? lru.held_blocks - lru.capacity_blocks : 0;
  auto blocks = lru.blocks;
  std::size_t oldest = kAgeBuckets;
  while (oldest > 0 && blocks[oldest - 1] == 0) {
    --oldest;
  }
  if (oldest == 0 || !returns.learned()) {
    return cost;
  }
  // A block at the head of the LRU is evicted after about as long as the
  // oldest blocks have survived idle: the horizon within which a return
  // still finds what is not evicted now. (The request's own blocks count
  // here: they survived that long.)
  cost.horizon_ms = age_bucket_typical_ms(oldest - 1) + lru.age_offset_ms;
  if (own_idle_ms && own_blocks > 0) {
    auto& own = blocks[age_bucket(std::max(*own_idle_ms - lru.age_offset_ms, 0.0))];
    own -= std::min(own, own_blocks);
  }
  auto remaining = cost.blocks;
  for (std::size_t bucket = oldest; bucket-- > 0 && remaining > 0;) {
    auto available = blocks[bucket];
    const auto skipped = std::min(available, ahead);
    available -= skipped;
    ahead -= skipped;
    const auto taken = std::min(available, remaining);
    if (taken == 0) {
      continue;
    }
    remaining -= taken;
    const double idle = age_bucket_typical_ms(bucket) + lru.age_offset_ms;
    cost.ms += static_cast<double>(taken) * returns.probability(idle, cost.horizon_ms) * ms_per_block;
  }
  return cost;
}

std::uint64_t surviving_blocks(const LruProfile& lru, std::uint64_t own_blocks, double own_idle_ms) {
  if (own_blocks == 0 || lru.capacity_blocks == 0 || lru.held_blocks <= lru.capacity_blocks) {
    return own_blocks;
  }
  std::uint64_t aged = 0;
  for (const auto count : lru.blocks) {
    aged += count;
  }
  if (aged == 0) {
    return own_blocks;  // no ages published yet: no order to evict in
  }
  const auto ahead = lru.held_blocks - lru.capacity_blocks;
  const auto own_bucket = age_bucket(std::max(own_idle_ms - lru.age_offset_ms, 0.0));
  std::uint64_t older = 0;
  for (std::size_t bucket = own_bucket + 1; bucket < kAgeBuckets; ++bucket) {
    older += lru.blocks[bucket];
  }
  if (ahead <= older) {
    return own_blocks;
  }
  const auto excess = ahead - older;
  // The prefix is in its bucket (the ages may predate it: at least itself).
  const auto peers = std::max(lru.blocks[own_bucket], own_blocks);
  if (excess >= peers) {
    return 0;
  }
  const auto lost = static_cast<std::uint64_t>(
      std::ceil(static_cast<double>(own_blocks) * static_cast<double>(excess) / static_cast<double>(peers)));
  return own_blocks - std::min(lost, own_blocks);
}

}  // namespace kvgate::policy
