#pragma once
// Capacity at an SLO: the highest arrival rate a target serves while the
// SLO holds, found by running it at rates chosen here. Pure: the caller
// runs each step (from reset caches) and reports whether the SLO held.
// Rates grow by doubling from the start until one fails, then the gap is
// bisected; the search ends after `max_steps` runs or when the gap is
// under `resolution` of the rate.
#include <cstdint>
#include <optional>
#include <vector>

namespace kvgate::load {

class CapacitySearch {
 public:
  CapacitySearch(double start_rate, std::uint32_t max_steps, double resolution = 0.05)
      : next_(start_rate > 0 ? start_rate : 1), max_steps_(max_steps), resolution_(resolution) {}

  // The rate to run next, or nothing when the search is over.
  [[nodiscard]] std::optional<double> next() const;
  void record(double rate, bool slo_held);

  // The highest rate that held (0: none did, even the lowest tried).
  [[nodiscard]] double capacity() const { return held_; }
  [[nodiscard]] std::uint32_t steps() const { return steps_; }

 private:
  double next_;
  std::uint32_t max_steps_;
  double resolution_;
  std::uint32_t steps_ = 0;
  double held_ = 0;               // highest rate that held
  std::optional<double> failed_;  // lowest rate that failed
};

}  // namespace kvgate::load
