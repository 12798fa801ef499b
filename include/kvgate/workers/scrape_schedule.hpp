#pragma once
// When to scrape one worker's /metrics next. Pure: times are inputs (ms).
// - One scrape at a time: a page still being served is not asked for again
//   (llama.cpp serves /metrics through the same task queue as inference, so
//   a busy replica answers late, and piled-up scrapes only queue behind
//   prompts).
// - After a failure or a timeout the next scrape waits twice as long each
//   time, up to `max_backoff`; a success restores the interval.
// A failed scrape only ages the engine snapshot (the policy then falls
// back); it never counts against the worker's health.
#include <algorithm>
#include <cstdint>

namespace kvgate::workers {

class ScrapeSchedule {
 public:
  // Whether a scrape may start now.
  [[nodiscard]] bool due(std::uint64_t now_ms) const { return !in_flight_ && now_ms >= next_ms_; }
  void started() { in_flight_ = true; }
  // The scrape in flight will never report (its round was replaced).
  void abandoned() { in_flight_ = false; }
  void finished(bool ok, std::uint64_t now_ms, std::uint64_t interval_ms, std::uint64_t max_backoff_ms) {
    in_flight_ = false;
    failures_ = ok ? 0 : std::min<std::uint32_t>(failures_ + 1, 30);
    next_ms_ = now_ms + wait_ms(interval_ms, max_backoff_ms);
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
};

}  // namespace kvgate::workers
