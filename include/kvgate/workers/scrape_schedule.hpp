#pragma once
// When to scrape one worker's /metrics next. Pure: times are inputs (ms).
// - One scrape at a time: a page still being served is not asked for again
//   (llama.cpp serves /metrics through the same task queue as inference, so
//   a busy replica answers late, and piled-up scrapes only queue behind
//   prompts).
// - After a failure or a timeout the next scrape waits twice as long each
//   time, up to `max_backoff`; a success restores the interval.
// - The timeout follows the page's observed latency: three times its
//   running mean plus four mean deviations, never below the configured
//   timeout, doubled after each failure in a row, at most kMaxTimeoutMs
//   (a busy llama.cpp replica answers late, not never).
// A failed scrape only ages the engine snapshot (the policy then falls
// back); it never counts against the worker's health.
#include <algorithm>
#include <cmath>
#include <cstdint>

namespace kvgate::workers {

class ScrapeSchedule {
 public:
  // Whether a scrape may start now.
  [[nodiscard]] bool due(std::uint64_t now_ms) const { return !in_flight_ && now_ms >= next_ms_; }
  void started() { in_flight_ = true; }
  // The scrape in flight will never report (its round was replaced).
  void abandoned() { in_flight_ = false; }
  static constexpr std::uint64_t kMaxTimeoutMs = 30'000;

  // `latency_ms`: how long the page took (a success's).
  void finished(bool ok, std::uint64_t now_ms, std::uint64_t interval_ms, std::uint64_t max_backoff_ms,
                std::uint64_t latency_ms = 0) {
    in_flight_ = false;
    failures_ = ok ? 0 : std::min<std::uint32_t>(failures_ + 1, 30);
    next_ms_ = now_ms + wait_ms(interval_ms, max_backoff_ms);
    if (ok) {
      const auto latency = static_cast<double>(latency_ms);
      if (latency_samples_ == 0) {
        latency_mean_ms_ = latency;
        latency_deviation_ms_ = latency / 2;
      } else {
        // Running means over about the last eight pages.
        latency_deviation_ms_ += (std::abs(latency - latency_mean_ms_) - latency_deviation_ms_) / 8;
        latency_mean_ms_ += (latency - latency_mean_ms_) / 8;
      }
      ++latency_samples_;
    }
  }
  // The timeout for the next scrape, given the configured one.
  [[nodiscard]] std::uint64_t timeout_ms(std::uint64_t configured_ms) const {
    const auto learned =
        latency_samples_ == 0 ? 0 : static_cast<std::uint64_t>(3 * latency_mean_ms_ + 4 * latency_deviation_ms_);
    std::uint64_t timeout = std::max(configured_ms, learned);
    for (std::uint32_t doubling = 0; doubling < failures_ && timeout < kMaxTimeoutMs; ++doubling) {
      timeout *= 2;
    }
    return std::min(timeout, std::max(configured_ms, kMaxTimeoutMs));
  }
  // The wait before the next scrape: the interval, doubled per consecutive
  // failure, at most max_backoff (never below the interval).
  [[nodiscard]] std::uint64_t wait_ms(std::uint64_t interval_ms, std::uint64_t max_backoff_ms) const {
    std::uint64_t wait = interval_ms;
    for (std::uint32_t doubling = 0; doubling < failures_ && wait < max_backoff_ms; ++doubling) {
      wait *= 2;
    }
    return std::max(interval_ms, std::min(wait, max_backoff_ms));
  }
  [[nodiscard]] std::uint32_t consecutive_failures() const { return failures_; }
  [[nodiscard]] bool in_flight() const { return in_flight_; }

 private:
  bool in_flight_ = false;
  std::uint32_t failures_ = 0;
  std::uint64_t next_ms_ = 0;
  std::uint64_t latency_samples_ = 0;
  double latency_mean_ms_ = 0;
  double latency_deviation_ms_ = 0;
};

}  // namespace kvgate::workers
