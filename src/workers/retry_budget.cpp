#include "kvgate/workers/retry_budget.hpp"

namespace kvgate::workers {

RetryBudget::Bucket& RetryBudget::bucket(std::uint64_t now_ms) {
  const auto second = now_ms / 1000;
  auto& slot = buckets_[second % kWindowSeconds];
  if (slot.second != second) {
    slot = {second, 0, 0};
  }
  return slot;
}

void RetryBudget::record_request(std::uint64_t now_ms) {
  ++bucket(now_ms).requests;
}

bool RetryBudget::try_retry(std::uint64_t now_ms, const config::RetryBudgetOptions& options) {
  const auto second = now_ms / 1000;
  double requests = 0;
  double retries = 0;
  for (const auto& slot : buckets_) {
    // Only buckets of the last kWindowSeconds seconds count.
    if (slot.second + kWindowSeconds > second && slot.second <= second) {
      requests += slot.requests;
      retries += slot.retries;
    }
  }
  const double allowed =
      options.ratio * requests + options.min_retries_per_second * static_cast<double>(kWindowSeconds);
  if (retries + 1 > allowed) {
    return false;
  }
  ++bucket(now_ms).retries;
  return true;
}

}  // namespace kvgate::workers
