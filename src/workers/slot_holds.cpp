#include "kvgate/workers/slot_holds.hpp"

namespace kvgate::workers {

bool SlotHolds::hold(std::uint64_t session, std::uint64_t until_ms, std::uint64_t now_ms) {
  if (session == 0 || until_ms <= now_ms) {
    return false;
  }
  for (auto& entry : entries_) {
    if (entry.session.load(std::memory_order_acquire) == session) {
      entry.until_ms.store(until_ms, std::memory_order_release);
      return true;
    }
  }
  for (auto& entry : entries_) {
    auto ended = entry.until_ms.load(std::memory_order_acquire);
    // Another thread may claim the same ended entry first: then the next.
    if (ended > now_ms || !entry.until_ms.compare_exchange_strong(ended, kClaiming, std::memory_order_acq_rel)) {
      continue;
    }
    entry.session.store(session, std::memory_order_release);
    entry.until_ms.store(until_ms, std::memory_order_release);
    return true;
  }
  return false;
}

bool SlotHolds::take(std::uint64_t session, std::uint64_t now_ms) {
  if (session == 0) {
    return false;
  }
  bool had = false;
  for (auto& entry : entries_) {
    if (entry.session.load(std::memory_order_acquire) == session) {
      had = entry.until_ms.exchange(0, std::memory_order_acq_rel) > now_ms || had;
    }
  }
  return had;
}

std::uint32_t SlotHolds::held_for_others(std::uint64_t session, std::uint64_t now_ms) const {
  std::uint32_t held = 0;
  for (const auto& entry : entries_) {
    held += entry.until_ms.load(std::memory_order_acquire) > now_ms &&
            (session == 0 || entry.session.load(std::memory_order_acquire) != session);
  }
  return held;
}

bool SlotHolds::kept_for(std::uint64_t session, std::uint64_t now_ms) const {
  if (session == 0) {
    return false;
  }
  for (const auto& entry : entries_) {
    if (entry.session.load(std::memory_order_acquire) == session &&
        entry.until_ms.load(std::memory_order_acquire) > now_ms) {
      return true;
    }
  }
  return false;
}

std::optional<std::uint64_t> SlotHolds::next_end(std::uint64_t now_ms) const {
  std::optional<std::uint64_t> first;
  for (const auto& entry : entries_) {
    const auto until = entry.until_ms.load(std::memory_order_acquire);
    if (until > now_ms && until != kClaiming && (!first || until < *first)) {
      first = until;
    }
  }
  return first;
}

}  // namespace kvgate::workers
