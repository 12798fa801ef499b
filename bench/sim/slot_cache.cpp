#include "slot_cache.hpp"

#include <algorithm>

namespace kvgate::sim {

std::uint32_t common_prefix(std::span<const TokenId> a, std::span<const TokenId> b) {
  auto [left, right] = std::mismatch(a.begin(), a.end(), b.begin(), b.end());
  return static_cast<std::uint32_t>(left - a.begin());
}

SlotCache::SlotCache(std::uint32_t slots, double min_similarity)
    : slots_(std::max<std::uint32_t>(1, slots)), min_similarity_(min_similarity) {}

std::optional<SlotCache::Grant> SlotCache::acquire(std::span<const TokenId> prompt) {
  std::optional<std::uint32_t> chosen;
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
  const auto reused = common_prefix(state.tokens, prompt);
  const auto last = prompt.empty() ? 0u : static_cast<std::uint32_t>(prompt.size()) - 1;
  return Grant{*chosen, std::min(reused, last)};
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
