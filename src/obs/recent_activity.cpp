#include "kvgate/obs/recent_activity.hpp"

#include <algorithm>

namespace kvgate::obs {

void RecentActivity::record(const RoutedRequest& request) {
  const std::uint64_t start = request.unix_ms - request.unix_ms % bucket_ms_;
  std::lock_guard lock(mutex_);
  ring_[recorded_ % kDecisionsKept] = request;
  ++recorded_;
  if (!request.prompt_tokens || !request.cached_tokens) {
    return;
  }
  auto& bucket = buckets_[(start / bucket_ms_) % kBuckets];
  if (bucket.start_unix_ms != start) {
    // A request finishing late may land in a bucket the ring has moved
    // past: only a newer bucket replaces an older one.
    if (bucket.start_unix_ms > start) {
      return;
    }
    bucket = HitBucket{start, 0, 0, 0};
  }
  bucket.requests += 1;
  bucket.prompt_tokens += *request.prompt_tokens;
  bucket.cached_tokens += std::min(*request.cached_tokens, *request.prompt_tokens);
}

std::vector<RoutedRequest> RecentActivity::recent(std::size_t limit) const {
  std::vector<RoutedRequest> newest_first;
  std::lock_guard lock(mutex_);
  const std::size_t available = std::min({recorded_, kDecisionsKept, limit});
  newest_first.reserve(available);
  for (std::size_t back = 1; back <= available; ++back) {
    newest_first.push_back(ring_[(recorded_ - back) % kDecisionsKept]);
  }
  return newest_first;
}

std::vector<HitBucket> RecentActivity::hit_buckets(std::uint64_t now_unix_ms) const {
  const std::uint64_t newest = now_unix_ms - now_unix_ms % bucket_ms_;
  std::vector<HitBucket> oldest_first(kBuckets);
  std::lock_guard lock(mutex_);
  for (std::size_t at = 0; at < kBuckets; ++at) {
    const std::uint64_t back = kBuckets - 1 - at;
    if (back * bucket_ms_ > newest) {
      continue;  // before the epoch: only in tests with small clocks
    }
    const std::uint64_t start = newest - back * bucket_ms_;
    const auto& bucket = buckets_[(start / bucket_ms_) % kBuckets];
    oldest_first[at] = bucket.start_unix_ms == start ? bucket : HitBucket{start, 0, 0, 0};
  }
  return oldest_first;
}

}  // namespace kvgate::obs
