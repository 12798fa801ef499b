#include "kvgate/kv_events/block_recency.hpp"

namespace kvgate::kv_events {

void BlockRecency::touch(prefix::BlockHash block, std::uint64_t now_ms) {
  const auto tick = static_cast<std::uint32_t>(now_ms / kTickMs);
  auto [entry, added] = tick_of_.try_emplace(block, tick);
  if (!added) {
    if (entry->second == tick) {
      return;
    }
    auto previous = blocks_per_tick_.find(entry->second);
    if (--previous->second == 0) {
      blocks_per_tick_.erase(previous);
    }
    entry->second = tick;
  }
  ++blocks_per_tick_[tick];
}

void BlockRecency::forget(prefix::BlockHash block) {
  auto found = tick_of_.find(block);
  if (found == tick_of_.end()) {
    return;
  }
  auto count = blocks_per_tick_.find(found->second);
  if (--count->second == 0) {
    blocks_per_tick_.erase(count);
  }
  tick_of_.erase(found);
}

void BlockRecency::clear() {
  tick_of_.clear();
  blocks_per_tick_.clear();
}

policy::AgeHistogram BlockRecency::ages(std::uint64_t now_ms) const {
  policy::AgeHistogram histogram{};
  const auto now_tick = now_ms / kTickMs;
  for (const auto& [tick, blocks] : blocks_per_tick_) {
    const auto age_ms = now_tick > tick ? static_cast<double>((now_tick - tick) * kTickMs) : 0.0;
    histogram[policy::age_bucket(age_ms)] += blocks;
  }
  return histogram;
}

}  // namespace kvgate::kv_events
