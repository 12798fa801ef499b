#pragma once
// Live state of one worker (engine replica), shared by all I/O threads.
// Concurrency: every mutable field is an atomic with a single purpose; the
// health-check counters are written only by the control thread's checker,
// the passive-failure counter by any I/O thread. A reload keeps the same
// WorkerState object for a worker whose id and URL did not change, so its
// health and in-flight count survive the reload.
#include <atomic>
#include <cstdint>
#include <string>

#include "kvgate/core/address.hpp"

namespace kvgate::workers {

struct HealthThresholds {
  std::uint32_t unhealthy_after = 3;   // consecutive failed active checks
  std::uint32_t healthy_after = 2;     // consecutive good active checks
  std::uint32_t passive_failures = 5;  // consecutive traffic failures; 0 disables
};

enum class HealthChange { none, went_down, went_up };

class WorkerState {
 public:
  WorkerState(std::string id, std::string url, HttpUrl endpoint)
      : id_(std::move(id)), url_(std::move(url)), endpoint_(std::move(endpoint)) {}

  [[nodiscard]] const std::string& id() const { return id_; }
  [[nodiscard]] const std::string& url() const { return url_; }
  [[nodiscard]] const HttpUrl& endpoint() const { return endpoint_; }

  [[nodiscard]] bool healthy() const { return healthy_.load(std::memory_order_relaxed); }
  [[nodiscard]] std::uint32_t in_flight() const { return in_flight_.load(std::memory_order_relaxed); }

  void request_started() { in_flight_.fetch_add(1, std::memory_order_relaxed); }
  void request_finished() { in_flight_.fetch_sub(1, std::memory_order_relaxed); }

  // Active checks (control thread only).
  HealthChange record_check(bool success, const HealthThresholds& thresholds);
  // Traffic outcomes (any I/O thread): connect errors and 5xx count as
  // failures, any other answer resets the streak.
  HealthChange record_traffic(bool failure, const HealthThresholds& thresholds);

 private:
  const std::string id_;
  const std::string url_;
  const HttpUrl endpoint_;
  // Workers start healthy so that traffic flows before the first check ends
  // (the same default as Envoy for hosts without a completed check).
  std::atomic<bool> healthy_{true};
  std::atomic<std::uint32_t> in_flight_{0};
  std::atomic<std::uint32_t> passive_failure_streak_{0};
  std::uint32_t check_failure_streak_ = 0;
  std::uint32_t check_success_streak_ = 0;
};

// Counts one request in the worker's in-flight total from construction
// until finish() or destruction, whichever comes first (exactly once).
class InFlightRequest {
 public:
  explicit InFlightRequest(WorkerState& worker) : worker_(&worker) { worker.request_started(); }
  InFlightRequest(const InFlightRequest&) = delete;
  InFlightRequest& operator=(const InFlightRequest&) = delete;
  ~InFlightRequest() { finish(); }

  void finish() {
    if (worker_ != nullptr) {
      worker_->request_finished();
      worker_ = nullptr;
    }
  }

 private:
  WorkerState* worker_;
};

}  // namespace kvgate::workers
