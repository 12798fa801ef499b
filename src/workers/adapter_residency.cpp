#include "kvgate/workers/adapter_residency.hpp"

#include <xxhash.h>

#include <algorithm>
#include <string_view>

namespace kvgate::workers {

std::uint64_t adapter_hash(std::string_view name) {
  const auto hash = XXH3_64bits(name.data(), name.size());
  return hash == 0 ? 1 : hash;
}

void AdapterResidency::routed(std::size_t adapter, std::uint64_t now_ms) {
  if (adapter < kTracked) {
    last_routed_[adapter].store(now_ms + 1, std::memory_order_relaxed);
  }
}

void AdapterResidency::publish_report(std::span<const std::uint64_t> running, std::span<const std::uint64_t> waiting,
                                      std::uint32_t max_loras) {
  for (std::size_t at = 0; at < kReported; ++at) {
    running_[at].store(at < running.size() ? running[at] : 0, std::memory_order_relaxed);
    waiting_[at].store(at < waiting.size() ? waiting[at] : 0, std::memory_order_relaxed);
  }
  running_count_.store(static_cast<std::uint32_t>(std::min(running.size(), kReported)), std::memory_order_relaxed);
  max_loras_.store(max_loras, std::memory_order_relaxed);
}

bool AdapterResidency::reported(const std::array<std::atomic<std::uint64_t>, kReported>& list,
                                std::uint64_t name_hash) const {
  return std::any_of(list.begin(), list.end(),
                     [&](const auto& entry) { return entry.load(std::memory_order_relaxed) == name_hash; });
}

policy::AdapterState AdapterResidency::state(std::size_t adapter, std::uint64_t name_hash, std::size_t adapters,
                                             std::uint32_t fallback_max_loras) const {
  using policy::AdapterState;
  if (reported(running_, name_hash)) {
    return AdapterState::resident;
  }
  if (reported(waiting_, name_hash)) {
    return AdapterState::waiting;
  }
  const auto engine_slots = max_loras_.load(std::memory_order_relaxed);
  const std::uint64_t slots = std::max<std::uint32_t>(1, engine_slots > 0 ? engine_slots : fallback_max_loras);
  adapters = std::min(adapters, kTracked);
  const auto mine = adapter < adapters ? last_routed_[adapter].load(std::memory_order_relaxed) : 0;
  // Held: the adapters routed here (the engine keeps the most recent ones),
  // at least those it reports running.
  std::uint64_t held = 0;
  std::uint64_t more_recent = 0;
  for (std::size_t other = 0; other < adapters; ++other) {
    const auto when = last_routed_[other].load(std::memory_order_relaxed);
    held += when > 0 ? 1 : 0;
    more_recent += other != adapter && when > mine ? 1 : 0;
  }
  held = std::max<std::uint64_t>(held, running_count_.load(std::memory_order_relaxed));
  if (mine > 0 && more_recent < slots) {
    return AdapterState::resident;
  }
  return std::min(held, slots) < slots ? AdapterState::loadable : AdapterState::evicts;
}

}  // namespace kvgate::workers
