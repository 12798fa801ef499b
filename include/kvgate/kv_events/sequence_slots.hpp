#pragma once
// A worker that keeps whole prompts in slots rather than blocks in a paged
// cache: llama-server with -np N and no host-RAM prompt cache. Each slot
// holds the last sequence it ran; a new request reuses the longest common
// prefix with the slot the server gives it, chosen as llama-server does
// (tools/server/server-context.cpp, get_available_slot):
// - the idle slot whose common prefix is the largest share of the prompt,
//   when that share exceeds `min_similarity` (--slot-prompt-similarity);
// - else the idle slot used longest ago (the last one on a tie);
// - none idle: the request waits and takes the first slot released.
// So the index credits a block to the worker exactly while an idle slot
// holds it: a busy slot's prompt cannot serve a new request (the server
// gives that request another slot), and a slot that is chosen loses what
// it held beyond the common prefix. When no slot is idle, a new request
// waits for the next slot released: the index credits what the slot it
// is expected to take will hold. Slots free in the order they started and
// go to the waiting requests oldest first, so that is the prompt of the
// busy slot after as many as there are requests waiting, or, with as many
// waiting as running, the prompt of the waiting request that will run in
// the slot before it.
//
// With llama-server's host-RAM prompt cache (--cache-ram, `ram_blocks` >
// 0): a slot taken by the least-recently-used rule, or by similarity while
// keeping under half of what it held, first saves what it held there; then
// the saved sequence that keeps at least a quarter of itself and beats the
// slot's own common prefix, as a share of itself and of the prompt, is
// restored into the slot and leaves the RAM cache; the oldest saved
// sequences go beyond `ram_blocks` (one always stays). The index credits
// what the RAM cache holds on the offloaded tier (priced by its load time).
//
// Prompts are compared by block hashes (a chained hash covers the whole
// prefix up to its block), so shares and prefixes are in blocks: kvgate
// predicts the reused prefix to the block below the engine's token figure.
//
// Pure and single-threaded (the index writer owns it); time comes in as
// milliseconds on any monotonic clock.
#include <cstdint>
#include <deque>
#include <optional>
#include <span>
#include <vector>

#include <absl/container/flat_hash_map.h>

#include "kvgate/index/prefix_index.hpp"

namespace kvgate::kv_events {

class SequenceSlots {
 public:
  SequenceSlots(std::uint32_t slots, double min_similarity, std::uint64_t ram_blocks = 0);

  // What the index must learn: blocks an idle slot came to hold (credit)
  // and blocks no idle slot held any more (withdraw the credit). One call
  // may do both to a block (a slot released, then taken by a waiting
  // request): credits() tells where it ended.
  struct Changes {
    std::vector<index::BlockHash> credit;
    std::vector<index::BlockHash> uncredit;
    std::vector<index::BlockHash> ram_credit;  // the same for the RAM cache (offloaded tier)
    std::vector<index::BlockHash> ram_uncredit;
    void clear() {
      credit.clear();
      uncredit.clear();
      ram_credit.clear();
      ram_uncredit.clear();
    }
  };

  // The request `ticket` with these prompt blocks was sent to the worker.
  void start(std::span<const index::BlockHash> blocks, std::uint64_t ticket, std::uint64_t now_ms, Changes& out);
  // It ended (answered, failed mid-way, or abandoned): its slot keeps its
  // prompt, and a waiting request takes the slot. `reported_blocks`: the
  // engine's cached tokens for it, in whole blocks, when it said. A figure
  // that is not the common prefix with what its modelled slot held, but is
  // with what exactly one other slot held then (still idle and unchanged
  // since), means the engine ran it there: that other slot holds what the
  // modelled one held before, which the request did not take. (Requests
  // reach the engine in another order than they were routed, or free their
  // slots in another order than the gateway sees them end.) Not with the
  // RAM cache modelled, whose restores the figure also counts.
  void finish(std::uint64_t ticket, std::uint64_t now_ms, Changes& out,
              std::optional<std::uint32_t> reported_blocks = std::nullopt);
  // It never ran (the engine refused it before its first token): its slot
  // holds what it held before.
  void withdraw(std::uint64_t ticket, std::uint64_t now_ms, Changes& out);
  // Another --slot-prompt-similarity or RAM cache size for the same slots:
  // the slots keep what they hold and run; a smaller RAM cache drops its
  // oldest sequences (all of them at 0).
  void reconfigure(double min_similarity, std::uint64_t ram_blocks, Changes& out);
  // The engine restarted (a new process, its slots and RAM cache empty).
  // The requests the model has running or waiting stay: they were sent to
  // the new process, since one sent to the old process failed with it and
  // was withdrawn. Their slots held nothing before them; the idle slots
  // and the RAM cache hold nothing.
  void engine_restarted(Changes& out);
  // Requests busy for longer than `max_busy_ms` are taken as finished: a
  // lost end must not pin a slot for ever.
  void expire(std::uint64_t now_ms, std::uint64_t max_busy_ms, Changes& out);

  [[nodiscard]] std::uint32_t size() const { return static_cast<std::uint32_t>(slots_.size()); }
  [[nodiscard]] std::uint32_t busy_slots() const;
  [[nodiscard]] std::size_t waiting() const { return waiting_.size(); }
  [[nodiscard]] bool credits(index::BlockHash block) const { return idle_holders_.contains(block); }
  [[nodiscard]] bool ram_credits(index::BlockHash block) const { return ram_holders_.contains(block); }
  [[nodiscard]] std::size_t ram_sequences() const { return ram_.size(); }
  [[nodiscard]] std::uint64_t ram_blocks() const { return ram_blocks_held_; }
  // Distinct blocks idle slots hold (what the index credits).
  [[nodiscard]] std::size_t credited_blocks() const { return idle_holders_.size(); }
  [[nodiscard]] std::span<const index::BlockHash> slot_blocks(std::uint32_t slot) const { return slots_[slot].blocks; }
  // The request running in the slot (none: idle).
  [[nodiscard]] std::optional<std::uint64_t> slot_ticket(std::uint32_t slot) const {
    return slots_[slot].running ? std::optional(slots_[slot].ticket) : std::nullopt;
  }

 private:
  // Running: another slot as its request found it, for the engine's
  // figure to be matched against.
  struct Alternative {
    std::uint32_t slot = 0;
    std::uint64_t generation = 0;  // the other slot's then
    std::uint32_t common = 0;      // blocks its content shared with the prompt
    bool whole = false;            // all of its content
  };
  struct Slot {
    std::vector<index::BlockHash> blocks;    // what it holds (running: the prompt it runs)
    std::vector<index::BlockHash> previous;  // running: what it held before (a withdrawal's)
    std::int64_t last_used_ms = -1;
    std::int64_t previous_last_used_ms = -1;  // running: when `previous` was last used
    bool running = false;
    std::uint64_t ticket = 0;  // the running request's
    std::uint64_t started_ms = 0;
    std::uint64_t generation = 0;  // changes whenever its content does
    // Running: the prompt's common prefix with `previous` (and whether that
    // was all of it), and with the other slots' contents then.
    std::uint32_t common = 0;
    bool whole = false;
    std::vector<Alternative> alternatives;
  };
  struct Waiting {
    std::uint64_t ticket = 0;
    std::vector<index::BlockHash> blocks;
    std::uint64_t since_ms = 0;
  };

  struct Choice {
    std::int64_t slot = -1;   // -1: none idle
    bool save_to_ram = true;  // not when a similar slot keeps most of what it held
  };
  [[nodiscard]] Choice choose(std::span<const index::BlockHash> blocks) const;
  [[nodiscard]] std::optional<std::uint32_t> running_slot(std::uint64_t ticket) const;
  void occupy(Choice choice, std::vector<index::BlockHash> blocks, std::uint64_t ticket, std::uint64_t now_ms,
              Changes& out);
  void save_and_restore(Slot& slot, std::span<const index::BlockHash> prompt, Changes& out);
  void ram_hold(std::span<const index::BlockHash> blocks, Changes& out);
  void ram_unhold(std::span<const index::BlockHash> blocks, Changes& out);
  void release(std::uint32_t slot, std::uint64_t now_ms, Changes& out);
  void correct_from_receipt(std::uint32_t slot, std::uint32_t reported_blocks, Changes& out);
  void admit_waiting(std::uint64_t now_ms, Changes& out);
  void refresh_next_free(Changes& out);
  void hold(std::span<const index::BlockHash> blocks, Changes& out);
  void unhold(std::span<const index::BlockHash> blocks, Changes& out);

  std::vector<Slot> slots_;
  double min_similarity_;
  std::uint64_t ram_limit_blocks_;
  std::deque<std::vector<index::BlockHash>> ram_;  // oldest first
  std::uint64_t ram_blocks_held_ = 0;
  absl::flat_hash_map<index::BlockHash, std::uint32_t> ram_holders_;
  std::deque<Waiting> waiting_;
  // No slot idle: what the slot expected to be free next holds, credited
  // as if it were idle.
  std::vector<index::BlockHash> next_free_blocks_;
  absl::flat_hash_map<index::BlockHash, std::uint32_t> idle_holders_;  // block -> idle slots holding it
};

}  // namespace kvgate::kv_events
