#pragma once
// How many retries the gateway may send (after Envoy's and Finagle's retry
// budgets): beyond a small floor, a fixed share of recent requests. When a
// whole fleet fails, each request then costs it about 1 + ratio attempts
// instead of 1 + retries: no retry storm. Pure, time is an input; one per
// I/O thread, so no sharing (the floor and the ratio apply per thread).
#include <array>
#include <cstdint>

#include "kvgate/config/options.hpp"

namespace kvgate::workers {

class RetryBudget {
 public:
  static constexpr std::uint64_t kWindowSeconds = 10;

  // A first attempt, at now_ms.
  void record_request(std::uint64_t now_ms);
  // Whether one more retry fits the budget; counts it when it does.
  bool try_retry(std::uint64_t now_ms, const config::RetryBudgetOptions& options);

 private:
  struct Bucket {
    std::uint64_t second = 0;  // unix second this bucket counts; stale buckets are reset on use
    std::uint32_t requests = 0;
    std::uint32_t retries = 0;
  };
  Bucket& bucket(std::uint64_t now_ms);

  std::array<Bucket, kWindowSeconds> buckets_{};
};

}  // namespace kvgate::workers
