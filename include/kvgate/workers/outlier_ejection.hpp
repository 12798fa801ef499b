#pragma once
// Passive outlier ejection, as a circuit breaker per worker (after Envoy's
// outlier detection, with a half-open probe): consecutive traffic failures
// open it, which takes the worker out of routing for an ejection time that
// doubles with each ejection in a row; when that time is over the breaker
// is half-open, the worker takes traffic again, and the next outcome
// decides: a success closes it (and forgets the ejections), a failure
// opens it again for twice as long. Pure: time is an input, the caller
// serialises calls.
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace kvgate::workers {

// What made a request count as a worker failure.
enum class FailureCause : std::uint8_t {
  none,
  connect,     // refused, unreachable or timed out connecting
  status_5xx,  // answered with a server error
  reset,       // closed or broke the connection (before or during the answer)
  timeout,     // no response header in time, or silent mid-answer
};

inline constexpr std::string_view to_string(FailureCause cause) {
  switch (cause) {
    case FailureCause::none:
      return "none";
    case FailureCause::connect:
      return "connect";
    case FailureCause::status_5xx:
      return "status_5xx";
    case FailureCause::reset:
      return "reset";
    case FailureCause::timeout:
      return "timeout";
  }
  return "unknown";
}

struct EjectionOptions {
  std::uint32_t consecutive_failures = 5;  // 0: never eject
  std::uint64_t base_ejection_ms = 5'000;
  std::uint64_t max_ejection_ms = 300'000;
};

enum class BreakerState : std::uint8_t { closed, open, half_open };

inline constexpr std::string_view to_string(BreakerState state) {
  switch (state) {
    case BreakerState::closed:
      return "closed";
    case BreakerState::open:
      return "open";
    case BreakerState::half_open:
      return "half_open";
  }
  return "unknown";
}

// Envoy's max_ejection_percent: whether one more of a model's `fleet`
// workers may be ejected while `ejected` already are. A lone worker never
// is (nothing to route to instead); one may always be when none is, even
// below the percentage's first whole worker.
[[nodiscard]] constexpr bool ejection_allowed(std::size_t ejected, std::size_t fleet, std::uint32_t max_percent) {
  return fleet > 1 && (ejected == 0 || (ejected + 1) * 100 <= std::size_t{max_percent} * fleet);
}

class CircuitBreaker {
 public:
  enum class Change : std::uint8_t { none, ejected, restored };

  // One finished request's outcome. `may_eject` false: the caller's cap on
  // ejected workers is reached, so this failure is counted but does not
  // open the breaker (a fleet that is failing as a whole keeps serving).
  Change record(FailureCause failure, std::uint64_t now_ms, const EjectionOptions& options, bool may_eject = true);

  [[nodiscard]] BreakerState state(std::uint64_t now_ms) const;
  // While open: when the worker takes traffic again (0 when closed).
  [[nodiscard]] std::uint64_t open_until_ms() const { return open_until_ms_; }
  [[nodiscard]] std::uint32_t ejections_in_a_row() const { return ejections_; }
  [[nodiscard]] std::uint32_t failure_streak() const { return streak_; }
  [[nodiscard]] FailureCause last_cause() const { return last_cause_; }

 private:
  void open(std::uint64_t now_ms, const EjectionOptions& options);

  std::uint64_t open_until_ms_ = 0;
  std::uint32_t ejections_ = 0;
  std::uint32_t streak_ = 0;
  FailureCause last_cause_ = FailureCause::none;
};

}  // namespace kvgate::workers
