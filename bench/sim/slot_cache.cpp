#include "slot_cache.hpp"

#include <algorithm>

namespace kvgate::sim {

std::uint32_t common_prefix(std::span<const TokenId> a, std::span<const TokenId> b) {
  auto [left, right] = std::mismatch(a.begin(), a.end(), b.begin(), b.end());
  return static_cast<std::uint32_t>(left - a.begin());
}

SlotCache::SlotCache(std::uint32_t slots, double min_similarity, std::uint64_t ram_tokens)
    : slots_(std::max<std::uint32_t>(1, slots)), min_similarity_(min_similarity), ram_limit_tokens_(ram_tokens) {}

std::optional<SlotCache::Grant> SlotCache::acquire(std::span<const TokenId> prompt) {
  std::optional<std::uint32_t> chosen;
  bool save_to_ram = true;  // unless a similar slot keeps most of what it held
  if (min_similarity_ > 0 && !prompt.empty()) {
    double best = 0;
    for (std::uint32_t slot = 0; slot < slots_.size(); ++slot) {
      const auto& state = slots_[slot];
      if (state.busy || state.tokens.empty()) {
        continue;
      }
      const double similarity =
          static_cast<double>(common_prefix(state.tokens, prompt)) / static_cast<double>(prompt.size());
      if (similarity > best && similarity > min_similarity_) {
        best = similarity;
        chosen = slot;
      }
    }
    if (chosen) {
      const auto& held = slots_[*chosen].tokens;
      save_to_ram = best * static_cast<double>(prompt.size()) / static_cast<double>(held.size()) < 0.5;
    }
  }
  if (!chosen) {
    std::int64_t oldest = 0;
    for (std::uint32_t slot = 0; slot < slots_.size(); ++slot) {
      const auto& state = slots_[slot];
      if (!state.busy && (!chosen || state.last_used <= oldest)) {
        oldest = state.last_used;
        chosen = slot;
      }
    }
  }
  if (!chosen) {
    return std::nullopt;
  }
  auto& state = slots_[*chosen];
  state.busy = true;
  bool restored = false;
  if (ram_limit_tokens_ > 0 && save_to_ram && !state.tokens.empty()) {
    ram_.push_back(state.tokens);
    restored = restore_from_ram(state, prompt);
    while (ram_.size() > 1 && ram_tokens() > ram_limit_tokens_) {
      ram_.pop_front();
    }
  }
  const auto reused = common_prefix(state.tokens, prompt);
  const auto last = prompt.empty() ? 0u : static_cast<std::uint32_t>(prompt.size()) - 1;
  const auto cached = std::min(reused, last);
  return Grant{*chosen, cached, restored ? cached : 0u};
}

bool SlotCache::restore_from_ram(Slot& slot, std::span<const TokenId> prompt) {
  const auto base = common_prefix(slot.tokens, prompt);
  double keep_best = static_cast<double>(base) / static_cast<double>(slot.tokens.size());
  double share_best = static_cast<double>(base) / static_cast<double>(prompt.size());
  auto best = ram_.end();
  for (auto entry = ram_.begin(); entry != ram_.end(); ++entry) {
    const auto common = common_prefix(*entry, prompt);
    const double keep = static_cast<double>(common) / static_cast<double>(entry->size());
    const double share = static_cast<double>(common) / static_cast<double>(prompt.size());
    if (keep < 0.25) {
      continue;  // llama.cpp does not trash a large prompt for a small part of it
    }
    if (keep_best < keep && share_best < share) {
      keep_best = keep;
      share_best = share;
      best = entry;
    }
  }
  if (best == ram_.end()) {
    return false;
  }
  slot.tokens = std::move(*best);
  ram_.erase(best);
  return true;
}

std::uint64_t SlotCache::ram_tokens() const {
  std::uint64_t total = 0;
  for (const auto& entry : ram_) {
    total += entry.size();
  }
  return total;
}

void SlotCache::release(std::uint32_t slot, std::span<const TokenId> tokens, std::uint64_t now) {
  auto& state = slots_[slot];
  state.tokens.assign(tokens.begin(), tokens.end());
  state.last_used = static_cast<std::int64_t>(now);
  state.busy = false;
}

bool SlotCache::clear() {
  if (busy() > 0) {
    return false;
  }
  for (auto& slot : slots_) {
    slot.tokens.clear();
    slot.last_used = -1;
  }
  return true;
}

std::uint32_t SlotCache::busy() const {
  return static_cast<std::uint32_t>(std::count_if(slots_.begin(), slots_.end(), [](const Slot& s) { return s.busy; }));
}

}  // namespace kvgate::sim
