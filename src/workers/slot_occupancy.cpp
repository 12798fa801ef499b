#include "kvgate/workers/slot_occupancy.hpp"

#include <algorithm>

namespace kvgate::workers {

std::size_t SlotOccupancy::admit(std::uint64_t now_ms, std::uint32_t slots) {
  if (slots == 0) {
    return kUntracked;
  }
  std::uint32_t running = 0;
  for (const auto& entry : entries_) {
    const auto start = entry.slot_start.load(std::memory_order_acquire);
    running += entry.dispatched.load(std::memory_order_acquire) != kFree && start != kWaiting && start != kLeaving;
  }
  for (std::size_t index = 0; index < kCapacity; ++index) {
    auto expected = kFree;
    if (entries_[index].dispatched.compare_exchange_strong(expected, now_ms + 1, std::memory_order_acq_rel)) {
      entries_[index].slot_start.store(running < slots ? start_at(now_ms, StartedBy::dispatch) : kWaiting,
                                       std::memory_order_release);
      return index;
    }
  }
  return kUntracked;
}

void SlotOccupancy::started(std::size_t entry, std::uint64_t now_ms) {
  if (entry >= kCapacity) {
    return;
  }
  auto expected = kWaiting;
  entries_[entry].slot_start.compare_exchange_strong(expected, start_at(now_ms, StartedBy::first_token),
                                                     std::memory_order_acq_rel);
}

SlotOccupancy::Times SlotOccupancy::release(std::size_t entry, std::uint64_t now_ms) {
  if (entry >= kCapacity) {
    return {};
  }
  auto& own = entries_[entry];
  const auto start = own.slot_start.exchange(kLeaving, std::memory_order_acq_rel);
  const auto dispatched = own.dispatched.exchange(kFree, std::memory_order_acq_rel);
  if (start == kWaiting || start == kLeaving) {
    return {};
  }
  promote_oldest_waiting(now_ms);
  const auto began = start_ms_plus_one(start);
  Times times;
  times.hold_ms = now_ms + 1 > began ? static_cast<double>(now_ms + 1 - began) : 0.0;
  switch (started_by(start)) {
    case StartedBy::dispatch:
      times.wait_ms = 0.0;
      break;
    case StartedBy::release:
      times.wait_ms = began > dispatched ? static_cast<double>(began - dispatched) : 0.0;
      break;
    case StartedBy::first_token:
      break;
  }
  return times;
}

void SlotOccupancy::promote_oldest_waiting(std::uint64_t now_ms) {
  // Another thread may promote the same entry first: then the next oldest.
  for (std::size_t tries = 0; tries < kCapacity; ++tries) {
    std::size_t oldest = kUntracked;
    std::uint64_t oldest_dispatch = kLeaving;
    for (std::size_t index = 0; index < kCapacity; ++index) {
      const auto dispatched = entries_[index].dispatched.load(std::memory_order_acquire);
      if (dispatched != kFree && dispatched < oldest_dispatch &&
          entries_[index].slot_start.load(std::memory_order_acquire) == kWaiting) {
        oldest = index;
        oldest_dispatch = dispatched;
      }
    }
    if (oldest == kUntracked) {
      return;
    }
    auto expected = kWaiting;
    if (entries_[oldest].slot_start.compare_exchange_strong(expected, start_at(now_ms, StartedBy::release),
                                                            std::memory_order_acq_rel)) {
      return;
    }
  }
}

SlotOccupancy::Snapshot SlotOccupancy::read(std::uint64_t now_ms, std::span<double> held_ms) const {
  Snapshot snapshot;
  for (const auto& entry : entries_) {
    if (entry.dispatched.load(std::memory_order_acquire) == kFree) {
      continue;
    }
    const auto start = entry.slot_start.load(std::memory_order_acquire);
    if (start == kWaiting) {
      ++snapshot.waiting;
    } else if (start != kLeaving && snapshot.running < held_ms.size()) {
      const auto began = start_ms_plus_one(start);
      held_ms[snapshot.running++] = now_ms + 1 > began ? static_cast<double>(now_ms + 1 - began) : 0.0;
    }
  }
  return snapshot;
}

}  // namespace kvgate::workers
