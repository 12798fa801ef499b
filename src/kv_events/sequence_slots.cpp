#include "kvgate/kv_events/sequence_slots.hpp"

#include <algorithm>

namespace kvgate::kv_events {
namespace {

std::size_t common_prefix(std::span<const index::BlockHash> a, std::span<const index::BlockHash> b) {
  return static_cast<std::size_t>(std::mismatch(a.begin(), a.end(), b.begin(), b.end()).first - a.begin());
}

}  // namespace

SequenceSlots::SequenceSlots(std::uint32_t slots, double min_similarity, std::uint64_t ram_blocks)
    : slots_(std::max<std::uint32_t>(1, slots)), min_similarity_(min_similarity), ram_limit_blocks_(ram_blocks) {}

SequenceSlots::Choice SequenceSlots::choose(std::span<const index::BlockHash> blocks) const {
  std::int64_t chosen = -1;
  double best = 0;
  if (min_similarity_ > 0 && !blocks.empty()) {
    for (std::size_t slot = 0; slot < slots_.size(); ++slot) {
      const auto& state = slots_[slot];
      if (state.running || state.blocks.empty()) {
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
    const auto held = slots_[static_cast<std::size_t>(chosen)].blocks.size();
    return {chosen, best * static_cast<double>(blocks.size()) / static_cast<double>(held) < 0.5};
  }
  std::int64_t oldest = 0;
  for (std::size_t slot = 0; slot < slots_.size(); ++slot) {
    const auto& state = slots_[slot];
    if (!state.running && (chosen < 0 || state.last_used_ms <= oldest)) {
      oldest = state.last_used_ms;
      chosen = static_cast<std::int64_t>(slot);
    }
  }
  return {chosen, true};
}

void SequenceSlots::start(std::span<const index::BlockHash> blocks, std::uint64_t ticket, std::uint64_t now_ms,
                          Changes& out) {
  const auto choice = choose(blocks);
  if (choice.slot < 0) {
    waiting_.push_back({ticket, {blocks.begin(), blocks.end()}, now_ms});
  } else {
    occupy(choice, {blocks.begin(), blocks.end()}, ticket, now_ms, out);
  }
  refresh_next_free(out);
}

void SequenceSlots::occupy(Choice choice, std::vector<index::BlockHash> blocks, std::uint64_t ticket,
                           std::uint64_t now_ms, Changes& out) {
  const auto chosen = static_cast<std::uint32_t>(choice.slot);
  auto& state = slots_[chosen];
  state.alternatives.clear();
  for (std::uint32_t other = 0; other < slots_.size(); ++other) {
    if (other != chosen) {
      const auto& content = slots_[other].blocks;
      const auto common = common_prefix(content, blocks);
      state.alternatives.push_back({other, slots_[other].generation, static_cast<std::uint32_t>(common),
                                    !content.empty() && common == content.size()});
    }
  }
  const auto common = common_prefix(state.blocks, blocks);
  state.common = static_cast<std::uint32_t>(common);
  state.whole = !state.blocks.empty() && common == state.blocks.size();
  state.previous_last_used_ms = state.last_used_ms;
  ++state.generation;
  unhold(state.blocks, out);
  if (ram_limit_blocks_ > 0 && choice.save_to_ram && !state.blocks.empty()) {
    save_and_restore(state, blocks, out);
  }
  state.previous = std::move(state.blocks);
  state.blocks = std::move(blocks);
  state.ticket = ticket;
  state.running = true;
  state.started_ms = now_ms;
}

void SequenceSlots::release(std::uint32_t slot, std::uint64_t now_ms, Changes& out) {
  auto& state = slots_[slot];
  state.running = false;
  state.previous.clear();
  state.last_used_ms = static_cast<std::int64_t>(now_ms);
  hold(state.blocks, out);
}

std::optional<std::uint32_t> SequenceSlots::running_slot(std::uint64_t ticket) const {
  for (std::uint32_t slot = 0; slot < slots_.size(); ++slot) {
    if (slots_[slot].running && slots_[slot].ticket == ticket) {
      return slot;
    }
  }
  return std::nullopt;
}

void SequenceSlots::correct_from_receipt(std::uint32_t slot, std::uint32_t reported_blocks, Changes& out) {
  // Within a block either way of the common prefix (the engine counts
  // tokens), or beyond it when that was a sequence's whole content (a
  // slot also holds the answer it generated after its prompt).
  const auto fits = [reported_blocks](std::uint32_t common, bool whole) {
    return reported_blocks + 1 >= common && (reported_blocks <= common + 1 || whole);
  };
  auto& state = slots_[slot];
  if (fits(state.common, state.whole)) {
    return;
  }
  const auto unchanged_idle = [this](const Alternative& alternative) {
    const auto& other = slots_[alternative.slot];
    return !other.running && other.generation == alternative.generation;
  };
  const Alternative* found = nullptr;
  for (const auto& alternative : state.alternatives) {
    if (fits(alternative.common, alternative.whole)) {
      if (found != nullptr) {
        return;  // two contents would give the figure: no telling which
      }
      found = &alternative;
    }
  }
  if (found == nullptr && reported_blocks > state.common) {
    // More than any modelled content gives: the engine held a sequence the
    // model had lost, and the one the model had the request take is still
    // there, in place of what the model wrongly keeps in another slot,
    // known only when just one other slot is idle and unchanged.
    for (const auto& alternative : state.alternatives) {
      if (unchanged_idle(alternative)) {
        if (found != nullptr) {
          return;
        }
        found = &alternative;
      }
    }
  }
  if (found == nullptr || !unchanged_idle(*found)) {
    return;  // no telling where, or that slot has changed since
  }
  auto& other = slots_[found->slot];
  unhold(other.blocks, out);
  other.blocks = std::move(state.previous);
  other.last_used_ms = state.previous_last_used_ms;
  ++other.generation;
  hold(other.blocks, out);
  state.previous.clear();
}

void SequenceSlots::finish(std::uint64_t ticket, std::uint64_t now_ms, Changes& out,
                           std::optional<std::uint32_t> reported_blocks) {
  if (auto slot = running_slot(ticket)) {
    if (reported_blocks && ram_limit_blocks_ == 0) {
      correct_from_receipt(*slot, *reported_blocks, out);
    }
    release(*slot, now_ms, out);
    admit_waiting(now_ms, out);
  } else {
    // Ended while still modelled as waiting: it ran in a slot the model did
    // not see free, which the next choices will correct.
    std::erase_if(waiting_, [&](const Waiting& waiting) { return waiting.ticket == ticket; });
  }
  refresh_next_free(out);
}

void SequenceSlots::withdraw(std::uint64_t ticket, std::uint64_t now_ms, Changes& out) {
  if (auto slot = running_slot(ticket)) {
    auto& state = slots_[*slot];
    state.blocks = std::move(state.previous);
    state.previous.clear();
    state.running = false;
    ++state.generation;
    hold(state.blocks, out);  // last use unchanged: it ran nothing
    admit_waiting(now_ms, out);
  } else {
    std::erase_if(waiting_, [&](const Waiting& waiting) { return waiting.ticket == ticket; });
  }
  refresh_next_free(out);
}

void SequenceSlots::reconfigure(double min_similarity, std::uint64_t ram_blocks, Changes& out) {
  min_similarity_ = min_similarity;
  ram_limit_blocks_ = ram_blocks;
  while (!ram_.empty() && (ram_limit_blocks_ == 0 || (ram_.size() > 1 && ram_blocks_held_ > ram_limit_blocks_))) {
    ram_unhold(ram_.front(), out);
    ram_.pop_front();
  }
}

void SequenceSlots::engine_restarted(Changes& out) {
  for (auto& state : slots_) {
    ++state.generation;
    if (state.running) {
      state.previous.clear();
      state.previous_last_used_ms = -1;
      state.common = 0;
      state.whole = false;
      state.alternatives.clear();  // every other slot was empty: no other content to have run in
    } else {
      unhold(state.blocks, out);
      state.blocks.clear();
      state.last_used_ms = -1;
    }
  }
  while (!ram_.empty()) {
    ram_unhold(ram_.front(), out);
    ram_.pop_front();
  }
  refresh_next_free(out);
}

void SequenceSlots::expire(std::uint64_t now_ms, std::uint64_t max_busy_ms, Changes& out) {
  bool released = false;
  for (std::uint32_t slot = 0; slot < slots_.size(); ++slot) {
    const auto& state = slots_[slot];
    if (state.running && now_ms >= state.started_ms + max_busy_ms) {
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
    if (!slot.running) {
      busy.clear();
      break;  // a new request gets an idle slot
    }
    busy.push_back(&slot);
  }
  // The slots free in the order they started, each to the oldest waiting
  // request; a new request takes the release after theirs: a running
  // slot's while fewer wait than run, else the one a waiting request will
  // have taken and run in (so it then holds that request's prompt).
  const std::vector<index::BlockHash>* next = nullptr;
  if (!busy.empty()) {
    std::sort(busy.begin(), busy.end(), [](const Slot* a, const Slot* b) {
      return a->started_ms != b->started_ms ? a->started_ms < b->started_ms : a < b;
    });
    next = waiting_.size() < busy.size() ? &busy[waiting_.size()]->blocks
                                         : &waiting_[waiting_.size() - busy.size()].blocks;
  }
  if (next != nullptr && *next == next_free_blocks_) {
    return;
  }
  unhold(next_free_blocks_, out);
  next_free_blocks_.clear();
  if (next != nullptr) {
    next_free_blocks_ = *next;
    hold(next_free_blocks_, out);
  }
}

// The slot's content goes to the RAM cache; a better saved sequence comes
// back into the slot (only what it held before the request matters: its
// content is replaced by the prompt right after).
void SequenceSlots::save_and_restore(Slot& slot, std::span<const index::BlockHash> prompt, Changes& out) {
  ram_.push_back(slot.blocks);
  ram_hold(ram_.back(), out);
  const auto base = common_prefix(slot.blocks, prompt);
  double keep_best = static_cast<double>(base) / static_cast<double>(slot.blocks.size());
  double share_best = prompt.empty() ? 0.0 : static_cast<double>(base) / static_cast<double>(prompt.size());
  auto best = ram_.end();
  for (auto entry = ram_.begin(); entry != ram_.end(); ++entry) {
    const auto common = common_prefix(*entry, prompt);
    const double keep = static_cast<double>(common) / static_cast<double>(entry->size());
    const double share = prompt.empty() ? 0.0 : static_cast<double>(common) / static_cast<double>(prompt.size());
    if (keep >= 0.25 && keep_best < keep && share_best < share) {
      keep_best = keep;
      share_best = share;
      best = entry;
    }
  }
  if (best != ram_.end()) {
    ram_unhold(*best, out);
    ram_.erase(best);
  }
  while (ram_.size() > 1 && ram_blocks_held_ > ram_limit_blocks_) {
    ram_unhold(ram_.front(), out);
    ram_.pop_front();
  }
}

void SequenceSlots::ram_hold(std::span<const index::BlockHash> blocks, Changes& out) {
  ram_blocks_held_ += blocks.size();
  for (auto block : blocks) {
    if (++ram_holders_[block] == 1) {
      out.ram_credit.push_back(block);
    }
  }
}

void SequenceSlots::ram_unhold(std::span<const index::BlockHash> blocks, Changes& out) {
  ram_blocks_held_ -= std::min<std::uint64_t>(ram_blocks_held_, blocks.size());
  for (auto block : blocks) {
    auto found = ram_holders_.find(block);
    if (found != ram_holders_.end() && --found->second == 0) {
      ram_holders_.erase(found);
      out.ram_uncredit.push_back(block);
    }
  }
}

// llama-server re-queues its deferred tasks when a slot is released; the
// oldest one then gets a slot by the same rule.
void SequenceSlots::admit_waiting(std::uint64_t now_ms, Changes& out) {
  while (!waiting_.empty()) {
    const auto choice = choose(waiting_.front().blocks);
    if (choice.slot < 0) {
      return;
    }
    auto waiting = std::move(waiting_.front());
    waiting_.pop_front();
    occupy(choice, std::move(waiting.blocks), waiting.ticket, now_ms, out);
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
      std::count_if(slots_.begin(), slots_.end(), [](const Slot& slot) { return slot.running; }));
}

}  // namespace kvgate::kv_events
