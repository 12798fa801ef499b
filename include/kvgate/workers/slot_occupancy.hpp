#pragma once
// Which of a slot engine's requests from this gateway hold a slot, and
// since when. llama-server runs `slots` requests at once and defers the
// rest in arrival order; a deferred one starts when a running one ends. So
// a request dispatched while a slot was free holds one from its dispatch, a
// deferred one from the end that freed its slot (or, at the latest, its
// first token). The router reads the running requests' times in their
// slots to forecast when each frees (policy/slot_wait.hpp).
//
// Shared between threads without a lock: any io thread admits and
// releases its own requests (each entry is written by the thread that
// claimed it, except its slot start, which a releasing thread may set once
// from "waiting" by compare-and-swap); the router's threads read. Readers
// may see an entry mid-change: the forecast is an estimate, and every
// value they can see is one some request had.
#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <span>

namespace kvgate::workers {

class SlotOccupancy {
 public:
  // Requests tracked at once per worker; beyond them a request is not
  // tracked (its slot counts as one the gateway did not send).
  static constexpr std::size_t kCapacity = 64;
  static constexpr std::size_t kUntracked = kCapacity;

  // A request dispatched at `now_ms` to an engine of `slots` slots: it holds
  // one at once when fewer than `slots` tracked requests do. Its entry, or
  // kUntracked when the table is full or `slots` is 0.
  std::size_t admit(std::uint64_t now_ms, std::uint32_t slots);
  // The request's first token came at `now_ms`: it holds a slot by then.
  void started(std::size_t entry, std::uint64_t now_ms);
  // What a released request's slot times were, in ms: how long it held
  // its slot (nullopt: it never held one), and how long it waited for it
  // (0: a slot was free at its dispatch; nullopt: not measured, or never
  // held one).
  struct Times {
    std::optional<double> hold_ms;
    std::optional<double> wait_ms;
    bool operator==(const Times&) const = default;
  };
  // The request ended at `now_ms`; if it held a slot, the oldest deferred
  // request takes it.
  Times release(std::size_t entry, std::uint64_t now_ms);

  struct Snapshot {
    std::size_t running = 0;    // entries of held_ms written
    std::uint32_t waiting = 0;  // tracked requests deferred
  };
  // The running requests' time in their slots at `now_ms` (0 for a slot
  // start after it), up to held_ms.size() of them.
  Snapshot read(std::uint64_t now_ms, std::span<double> held_ms) const;

 private:
  // Times are stored +1 so that 0 means none; a slot start also says how
  // it began (StartedBy, in its low bits).
  static constexpr std::uint64_t kFree = 0;     // dispatched: the entry is unused
  static constexpr std::uint64_t kWaiting = 0;  // slot_start: deferred
  enum class StartedBy : std::uint64_t { dispatch = 0, release = 1, first_token = 2 };
  static constexpr std::uint64_t start_at(std::uint64_t now_ms, StartedBy how) {
    return ((now_ms + 1) << 2) | static_cast<std::uint64_t>(how);
  }
  static constexpr std::uint64_t start_ms_plus_one(std::uint64_t start) { return start >> 2; }
  static constexpr StartedBy started_by(std::uint64_t start) { return static_cast<StartedBy>(start & 3); }
  // slot_start of an entry not (or no longer) a request's: never promoted.
  static constexpr std::uint64_t kLeaving = std::numeric_limits<std::uint64_t>::max();
  struct Entry {
    std::atomic<std::uint64_t> dispatched{kFree};
    std::atomic<std::uint64_t> slot_start{kLeaving};
  };
  void promote_oldest_waiting(std::uint64_t now_ms);

  std::array<Entry, kCapacity> entries_;
};

}  // namespace kvgate::workers
