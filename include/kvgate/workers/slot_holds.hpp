#pragma once
// A slot engine's slots kept idle for the conversations whose turns just
// freed them (admission.hold_slots; policy/slot_hold.hpp decides how
// long). While a hold is in force the router counts the slot as taken for
// every other session's request, so the worker takes no request that
// llama-server would run in that slot, and the admission queue keeps
// those requests; the held session's next turn finds its history there.
//
// Shared between threads without a lock: any io thread holds and takes,
// the router and the admission gate read. A thread claims an ended entry
// by compare-and-swap on its end, then writes its session and its end; a
// reader may see a hold a moment early or for another session: the count
// is an estimate, as the in-flight counts are.
#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>

namespace kvgate::workers {

class SlotHolds {
 public:
  // At most one hold per slot, and slot engines are modelled up to 16 slots.
  static constexpr std::size_t kCapacity = 16;

  // Keep a slot for `session` (a key hash, not 0) until `until_ms`; a
  // session's new hold on the worker replaces its old one. False when every
  // entry is in force (the slot is not kept).
  bool hold(std::uint64_t session, std::uint64_t until_ms, std::uint64_t now_ms);
  // The session's turn came to the worker: its hold there ends. Whether it
  // had one in force.
  bool take(std::uint64_t session, std::uint64_t now_ms);
  // Holds in force at `now_ms` for sessions other than `session` (0: all).
  [[nodiscard]] std::uint32_t held_for_others(std::uint64_t session, std::uint64_t now_ms) const;
  // Whether a hold for `session` is in force.
  [[nodiscard]] bool kept_for(std::uint64_t session, std::uint64_t now_ms) const;
  // When the first hold in force ends (nullopt: none in force).
  [[nodiscard]] std::optional<std::uint64_t> next_end(std::uint64_t now_ms) const;

 private:
  // until_ms of an entry a thread is claiming: in force, owner unknown.
  static constexpr std::uint64_t kClaiming = std::numeric_limits<std::uint64_t>::max();
  struct Entry {
    std::atomic<std::uint64_t> session{0};
    std::atomic<std::uint64_t> until_ms{0};  // in force while later than now
  };
  std::array<Entry, kCapacity> entries_;
};

}  // namespace kvgate::workers
