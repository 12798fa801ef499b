#pragma once
// llama.cpp's prompt cache without a host-RAM tier (`llama-server -np N
// --cache-ram 0`): each of N slots keeps the tokens of the last sequence it
// ran (prompt and generated tokens), and a new request reuses the longest
// common prefix with the slot it gets (tools/server/server-context.cpp,
// get_available_slot):
// - among idle slots that hold tokens, the one whose common prefix is the
//   largest share of the new prompt, if that share exceeds
//   --slot-prompt-similarity (0.1 by default; 0 turns the rule off);
// - else the idle slot used longest ago, the last such slot on a tie (all
//   slots start unused, so the first request lands on the last slot);
// - none idle: the request waits (deferred) until a slot is released.
// Reuse is token-granular and at least the prompt's last token is computed.
//
// With a host-RAM prompt cache (`--cache-ram`, `ram_tokens` > 0): when the
// slot was taken by the least-recently-used rule, or by similarity while
// keeping under half of what it held, and it held something, its sequence
// is saved to the RAM cache; then the cached sequence that keeps at least a
// quarter of itself and beats the slot's own common prefix both as a share
// of itself and of the prompt is restored into the slot (and leaves the
// cache); the oldest cached sequences go while the cache holds more than
// `ram_tokens` (at least one stays). (server_prompt_cache, server-task.cpp.)
// Pure: the engine passes its step count as the clock.
#include <cstdint>
#include <deque>
#include <optional>
#include <span>
#include <vector>

#include "kvgate/core/token.hpp"

namespace kvgate::sim {

using kvgate::TokenId;

class SlotCache {
 public:
  SlotCache(std::uint32_t slots, double min_similarity, std::uint64_t ram_tokens = 0);

  struct Grant {
    std::uint32_t slot = 0;
    std::uint32_t cached_tokens = 0;    // the prefix reused, below the prompt's length
    std::uint32_t restored_tokens = 0;  // of those, restored from the RAM cache
  };
  // The slot the prompt gets (now busy), or none while every slot is busy.
  std::optional<Grant> acquire(std::span<const TokenId> prompt);
  // The slot is idle again holding `tokens` (what it computed).
  void release(std::uint32_t slot, std::span<const TokenId> tokens, std::uint64_t now);

  // Forgets what every slot holds (a benchmark's reset between runs);
  // refused while a slot is busy.
  bool clear();

  [[nodiscard]] std::uint32_t size() const { return static_cast<std::uint32_t>(slots_.size()); }
  [[nodiscard]] std::uint32_t busy() const;
  [[nodiscard]] std::span<const TokenId> tokens(std::uint32_t slot) const { return slots_[slot].tokens; }
  [[nodiscard]] std::size_t ram_sequences() const { return ram_.size(); }
  [[nodiscard]] std::uint64_t ram_tokens() const;

 private:
  struct Slot {
    std::vector<TokenId> tokens;
    std::int64_t last_used = -1;
    bool busy = false;
  };
  bool restore_from_ram(Slot& slot, std::span<const TokenId> prompt);

  std::vector<Slot> slots_;
  double min_similarity_;
  std::uint64_t ram_limit_tokens_;
  std::deque<std::vector<TokenId>> ram_;  // oldest first
};

std::uint32_t common_prefix(std::span<const TokenId> a, std::span<const TokenId> b);

}  // namespace kvgate::sim
