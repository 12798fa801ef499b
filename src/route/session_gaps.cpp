#include "kvgate/route/session_gaps.hpp"

namespace kvgate::route {

void SessionGaps::count_turn() {
  if (turns_.fetch_add(1, std::memory_order_relaxed) + 1 != kHalveAt) {
    return;
  }
  // Exactly one thread sees the count reach kHalveAt.
  for (auto& gap : gaps_) {
    gap.store(gap.load(std::memory_order_relaxed) / 2, std::memory_order_relaxed);
  }
  for (auto& think : think_) {
    think.store(think.load(std::memory_order_relaxed) / 2, std::memory_order_relaxed);
  }
  sessions_.store(sessions_.load(std::memory_order_relaxed) / 2, std::memory_order_relaxed);
  turns_.fetch_sub(kHalveAt / 2, std::memory_order_relaxed);
}

void SessionGaps::record_first_turn() {
  sessions_.fetch_add(1, std::memory_order_relaxed);
  count_turn();
}

void SessionGaps::record_next_turn(std::uint64_t gap_ms) {
  gaps_[policy::age_bucket(static_cast<double>(gap_ms))].fetch_add(1, std::memory_order_relaxed);
  count_turn();
}

void SessionGaps::record_think(std::uint64_t think_ms) {
  think_[policy::age_bucket(static_cast<double>(think_ms))].fetch_add(1, std::memory_order_relaxed);
}

SessionGaps::Counts SessionGaps::counts() const {
  Counts counts;
  for (std::size_t bucket = 0; bucket < gaps_.size(); ++bucket) {
    counts.gaps[bucket] = gaps_[bucket].load(std::memory_order_relaxed);
    counts.think[bucket] = think_[bucket].load(std::memory_order_relaxed);
  }
  counts.turns = turns_.load(std::memory_order_relaxed);
  counts.sessions = sessions_.load(std::memory_order_relaxed);
  return counts;
}

policy::ReturnModel SessionGaps::model() const {
  const auto now = counts();
  return {now.gaps, now.turns, now.sessions};
}

policy::ReturnModel SessionGaps::think_model() const {
  const auto now = counts();
  return {now.think, now.turns, now.sessions};
}

}  // namespace kvgate::route
