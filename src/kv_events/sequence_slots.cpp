#include "kvgate/kv_events/sequence_slots.hpp"

#include <algorithm>

namespace kvgate::kv_events {
namespace {

std::size_t common_prefix(std::span<const index::BlockHash> a, std::span<const index::BlockHash> b) {
  return static_cast<std::size_t>(std::mismatch(a.begin(), a.end(), b.begin(), b.end()).first - a.begin());
}

}  // namespace

SequenceSlots::SequenceSlots(std::uint32_t slots, double min_similarity)
    : slots_(std::max<std::uint32_t>(1, slots)), min_similarity_(min_similarity) {}

std::int64_t SequenceSlots::choose(std::span<const index::BlockHash> blocks) const {
  std::int64_t chosen = -1;
  if (min_similarity_ > 0 && !blocks.empty()) {
    double best = 0;
    for (std::size_t slot = 0; slot < slots_.size(); ++slot) {
      const auto& state = slots_[slot];
      if (state.ticket != 0 || state.blocks.empty()) {
        continue;
      }
      const double similarity =
          static_cast<double>(common_prefix(state.blocks, blocks)) / static_cast<double>(blocks.size());
      if (similarity > best && similarity > min_similarity_) {
        best = similarity;
        chosen = static_cast<std::int64_t>(slot);
      }
    }
  }
  if (chosen >= 0) {
    return chosen;
  }
  std::int64_t oldest = 0;
  for (std::size_t slot = 0; slot < slots_.size(); ++slot) {
    const auto& state = slots_[slot];
    if (state.ticket == 0 && (chosen < 0 || state.last_used_ms <= oldest)) {
      oldest = state.last_used_ms;
      chosen = static_cast<std::int64_t>(slot);
    }
  }
  return chosen;
}

void SequenceSlots::start(std::span<const index::BlockHash> blocks, std::uint64_t ticket, std::uint64_t now_ms,
                          Changes& out) {
  if (ticket == 0) {
    return;  // 0 marks an idle slot: such a request cannot be followed
  }
  const auto slot = choose(blocks);
  if (slot < 0) {
    waiting_.push_back({ticket, {blocks.begin(), blocks.end()}, now_ms});
  } else {
    occupy(static_cast<std::uint32_t>(slot), {blocks.begin(), blocks.end()}, ticket, now_ms, out);
  }
  refresh_next_free(out);
}

void SequenceSlots::occupy(std::uint32_t slot, std::vector<index::BlockHash> blocks, std::uint64_t ticket,
                           std::uint64_t now_ms, Changes& out) {
  auto& state = slots_[slot];
  unhold(state.blocks, out);
  state.previous = std::move(state.blocks);
  state.blocks = std::move(blocks);
  state.ticket = ticket;
  state.started_ms = now_ms;
}

void SequenceSlots::release(std::uint32_t slot, std::uint64_t now_ms, Changes& out) {
  auto& state = slots_[slot];
  state.ticket = 0;
  state.previous.clear();
  state.last_used_ms = static_cast<std::int64_t>(now_ms);
  hold(state.blocks, out);
}

void SequenceSlots::finish(std::uint64_t ticket, std::uint64_t now_ms, Changes& out) {
  if (ticket == 0) {
    return;
  }
  for (std::uint32_t slot = 0; slot < slots_.size(); ++slot) {
    if (slots_[slot].ticket == ticket) {
      release(slot, now_ms, out);
      admit_waiting(now_ms, out);
      refresh_next_free(out);
      return;
    }
  }
  // Ended while still modelled as waiting: it ran in a slot the model did
  // not see free, which the next choices will correct.
  std::erase_if(waiting_, [&](const Waiting& waiting) { return waiting.ticket == ticket; });
  refresh_next_free(out);
}

void SequenceSlots::withdraw(std::uint64_t ticket, std::uint64_t now_ms, Changes& out) {
  if (ticket == 0) {
    return;
  }
  for (std::uint32_t slot = 0; slot < slots_.size(); ++slot) {
    auto& state = slots_[slot];
    if (state.ticket == ticket) {
      state.blocks = std::move(state.previous);
      state.previous.clear();
      state.ticket = 0;
      hold(state.blocks, out);  // last use unchanged: it ran nothing
      admit_waiting(now_ms, out);
      refresh_next_free(out);
      return;
    }
  }
  std::erase_if(waiting_, [&](const Waiting& waiting) { return waiting.ticket == ticket; });
  refresh_next_free(out);
}

void SequenceSlots::expire(std::uint64_t now_ms, std::uint64_t max_busy_ms, Changes& out) {
  bool released = false;
  for (std::uint32_t slot = 0; slot < slots_.size(); ++slot) {
    const auto& state = slots_[slot];
    if (state.ticket != 0 && now_ms >= state.started_ms + max_busy_ms) {
      release(slot, now_ms, out);
      released = true;
    }
  }
  std::erase_if(waiting_, [&](const Waiting& waiting) { return now_ms >= waiting.since_ms + max_busy_ms; });
  if (released) {
    admit_waiting(now_ms, out);
  }
  refresh_next_free(out);
}

void SequenceSlots::refresh_next_free(Changes& out) {
  std::vector<const Slot*> busy;
  for (const auto& slot : slots_) {
    if (slot.ticket == 0) {
      busy.clear();
      break;  // a new request gets an idle slot
    }
    busy.push_back(&slot);
  }
  const Slot* next = nullptr;
  if (!busy.empty()) {
    std::sort(busy.begin(), busy.end(), [](const Slot* a, const Slot* b) {
      return a->started_ms != b->started_ms ? a->started_ms < b->started_ms : a < b;
    });
    next = busy[std::min(waiting_.size(), busy.size() - 1)];
  }
  if (next != nullptr && next->blocks == next_free_blocks_) {
    return;
  }
  unhold(next_free_blocks_, out);
  next_free_blocks_.clear();
  if (next != nullptr) {
    next_free_blocks_ = next->blocks;
    hold(next_free_blocks_, out);
  }
}

// llama-server re-queues its deferred tasks when a slot is released; the
// oldest one then gets a slot by the same rule.
void SequenceSlots::admit_waiting(std::uint64_t now_ms, Changes& out) {
  while (!waiting_.empty()) {
    const auto slot = choose(waiting_.front().blocks);
    if (slot < 0) {
      return;
    }
    auto waiting = std::move(waiting_.front());
    waiting_.pop_front();
    occupy(static_cast<std::uint32_t>(slot), std::move(waiting.blocks), waiting.ticket, now_ms, out);
  }
}

void SequenceSlots::hold(std::span<const index::BlockHash> blocks, Changes& out) {
  for (auto block : blocks) {
    if (++idle_holders_[block] == 1) {
      out.credit.push_back(block);
    }
  }
}

void SequenceSlots::unhold(std::span<const index::BlockHash> blocks, Changes& out) {
  for (auto block : blocks) {
    auto found = idle_holders_.find(block);
    if (found == idle_holders_.end()) {
      continue;
    }
    if (--found->second == 0) {
      idle_holders_.erase(found);
      out.uncredit.push_back(block);
    }
  }
}

std::uint32_t SequenceSlots::busy_slots() const {
  return static_cast<std::uint32_t>(
      std::count_if(slots_.begin(), slots_.end(), [](const Slot& slot) { return slot.ticket != 0; }));
}

}  // namespace kvgate::kv_events
