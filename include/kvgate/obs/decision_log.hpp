#pragma once
// The decision log: one JSON line per routed request (contract: ts,
// request_id, session, model, worker, policy, reason, candidates, and once
// the response ends status, ttft_ms, decode_ms, retries, ...). Lines are
// queued to a background writer thread; when the queue is full the oldest
// line is dropped rather than slowing a request (dropped lines are counted).
#include <cstdint>
#include <memory>
#include <string>

#include "kvgate/core/result.hpp"

namespace spdlog {
class async_logger;
namespace details {
class thread_pool;
}
}  // namespace spdlog

namespace kvgate::obs {

class DecisionLog {
 public:
  // Opens (appends to) the file; start-up and reload only.
  static Result<std::shared_ptr<DecisionLog>, std::string> open(const std::string& path);
  ~DecisionLog();

  void write(const std::string& line);  // thread-safe, never blocks on I/O
  [[nodiscard]] std::uint64_t dropped() const;
  [[nodiscard]] const std::string& path() const { return path_; }

 private:
  DecisionLog() = default;
  std::string path_;
  std::shared_ptr<spdlog::details::thread_pool> pool_;
  std::shared_ptr<spdlog::async_logger> logger_;
};

}  // namespace kvgate::obs
