#include "kvgate/route/session_table.hpp"

#include <xxhash.h>

#include <algorithm>
#include <array>

namespace kvgate::route {

std::string session_table_key(std::string_view key) {
  if (key.size() <= kMaxKeyBytes) {
    return std::string(key);
  }
  const auto hash = XXH3_128bits(key.data(), key.size());
  static constexpr char kHex[] = "0123456789abcdef";
  std::string stored = "xxh3:";
  for (auto half : {hash.high64, hash.low64}) {
    for (int shift = 60; shift >= 0; shift -= 4) {
      stored.push_back(kHex[(half >> shift) & 0xF]);
    }
  }
  return stored;
}

namespace {

// Keys within the limit are used as they are, without a copy.
template <class Use>
auto with_stored_key(std::string_view key, Use use) {
  if (key.size() <= kMaxKeyBytes) {
    return use(key);
  }
  const auto stored = session_table_key(key);
  return use(std::string_view(stored));
}

bool expired(std::uint64_t last_seen_ms, std::uint64_t now_ms, std::uint64_t ttl_ms) {
  return now_ms > last_seen_ms && now_ms - last_seen_ms > ttl_ms;
}

std::uint64_t key_hash_of(std::string_view stored) {
  return XXH3_64bits(stored.data(), stored.size());
}

// Anchor positions of a prompt of `count` blocks, deepest first: the block
// indices 2^k - 1 and 3 * 2^(k-1) - 1 (twice per doubling, so that a
// shared history is seen within a third of its length).
template <class Visit>
void for_each_anchor(std::size_t count, Visit visit) {
  std::array<std::size_t, 128> positions{};
  std::size_t found = 0;
  for (std::size_t power = 1; power <= count && found + 2 <= positions.size(); power *= 2) {
    positions[found++] = power - 1;
    if (power >= 2 && power + power / 2 <= count) {
      positions[found++] = power + power / 2 - 1;
    }
  }
  std::sort(positions.begin(), positions.begin() + static_cast<std::ptrdiff_t>(found));
  for (std::size_t at = found; at > 0; --at) {
    if (!visit(positions[at - 1])) {
      return;
    }
  }
}

}  // namespace

SessionTable::SessionTable(SessionLimits limits)
    : max_sessions_(limits.max_sessions), idle_ttl_ms_(limits.idle_ttl_ms), turns_kept_(limits.turns_kept) {}

void SessionTable::set_limits(SessionLimits limits) {
  max_sessions_ = std::max<std::uint32_t>(limits.max_sessions, 1);
  idle_ttl_ms_ = limits.idle_ttl_ms;
  turns_kept_ = std::max<std::uint32_t>(limits.turns_kept, 1);
}

SessionTable::Shard& SessionTable::shard_for(std::string_view stored_key) const {
  return shards_[key_hash_of(stored_key) % kShards];
}

SessionTable::AnchorShard& SessionTable::anchor_shard_for(std::uint64_t block) const {
  return anchors_[(block >> 7) % kShards];
}

std::optional<std::string> SessionTable::find_parent(std::uint64_t key_hash, std::span<const std::uint64_t> blocks,
                                                     std::uint64_t now_ms) const {
  const auto ttl = idle_ttl_ms_.load();
  // The deepest anchor whose owner's history this prompt continues past
  // the owner's first prompt. A preamble every session sends (tools, a
  // system prompt) lies within each owner's first prompt and makes no one
  // a parent; a sibling that owns a deeper anchor (the same fork text)
  // fails the same test, so the search goes on to the shared parent.
  std::optional<AnchorOwner> owner;
  for_each_anchor(blocks.size(), [&](std::size_t position) {
    auto& shard = anchor_shard_for(blocks[position]);
    std::lock_guard lock(shard.mutex);
    auto found = shard.owners.find(blocks[position]);
    if (found == shard.owners.end() || found->second.key_hash == key_hash ||
        expired(found->second.seen_ms, now_ms, ttl) || position + 1 <= found->second.first_turn_blocks) {
      return true;
    }
    owner = found->second;
    return false;
  });
  if (!owner) {
    return std::nullopt;
  }
  auto& shard = shards_[owner->key_hash % kShards];
  std::lock_guard lock(shard.mutex);
  auto found = shard.by_hash.find(owner->key_hash);
  if (found == shard.by_hash.end() || expired(found->second->last_seen_ms, now_ms, ttl)) {
    return std::nullopt;
  }
  return found->second->key;
}

void SessionTable::register_anchors(std::uint64_t key_hash, std::span<const std::uint64_t> blocks,
                                    std::uint32_t first_turn_blocks, std::uint64_t now_ms) {
  const auto ttl = idle_ttl_ms_.load();
  const auto capacity =
      std::max<std::size_t>(64, static_cast<std::size_t>(max_sessions_.load()) * kAnchorsPerSession / kShards);
  for_each_anchor(blocks.size(), [&](std::size_t position) {
    auto& shard = anchor_shard_for(blocks[position]);
    std::lock_guard lock(shard.mutex);
    auto found = shard.owners.find(blocks[position]);
    if (found != shard.owners.end()) {
      auto& owner = found->second;
      if (owner.key_hash == key_hash) {
        owner.seen_ms = now_ms;
      } else if (expired(owner.seen_ms, now_ms, ttl)) {
        owner = {key_hash, first_turn_blocks, now_ms};
      }
      return true;
    }
    if (shard.owners.size() >= capacity) {
      absl::erase_if(shard.owners, [&](const auto& entry) { return expired(entry.second.seen_ms, now_ms, ttl); });
      if (shard.owners.size() >= capacity) {
        return true;  // full of live sessions' anchors: this one is not kept
      }
    }
    shard.owners.emplace(blocks[position], AnchorOwner{key_hash, first_turn_blocks, now_ms});
    return true;
  });
}

std::size_t SessionTable::shard_capacity() const {
  return std::max<std::size_t>(1, (max_sessions_.load() + kShards - 1) / kShards);
}

SessionState SessionTable::state_of(const Entry& entry, std::uint64_t now_ms) const {
  return {entry.worker,
          entry.worker_position,
          entry.turns,
          entry.last_seen_ms,
          entry.last_input_tokens,
          expired(entry.last_seen_ms, now_ms, idle_ttl_ms_.load()),
          entry.last_answer_tokens,
          entry.last_answered_ms};
}

template <class Visit>
auto SessionTable::with_entry(std::string_view key, Visit visit) const {
  return with_stored_key(key, [&](std::string_view stored) {
    auto& shard = shard_for(stored);
    std::lock_guard lock(shard.mutex);
    auto found = shard.by_key.find(stored);
    return visit(found == shard.by_key.end() ? nullptr : &*found->second);
  });
}

std::optional<SessionState> SessionTable::find(std::string_view key, std::uint64_t now_ms) const {
  return with_entry(key, [&](const Entry* entry) -> std::optional<SessionState> {
    if (entry == nullptr) {
      return std::nullopt;
    }
    return state_of(*entry, now_ms);
  });
}

std::uint64_t SessionTable::commit_turn(std::string_view key, SessionTurn turn, std::uint64_t now_ms, bool same_request,
                                        std::string_view key_source, std::span<const std::uint64_t> blocks) {
  return with_stored_key(key, [&](std::string_view stored) -> std::uint64_t {
    const auto key_hash = key_hash_of(stored);
    // A session's first turn may continue another's history: looked up
    // before this shard's lock is taken (the parent may share the shard).
    std::optional<std::string> parent;
    if (!blocks.empty() && !same_request) {
      const auto state = find(stored, now_ms);
      if (!state || state->expired) {
        parent = find_parent(key_hash, blocks, now_ms);
      }
    }
    auto& shard = shard_for(stored);
    const auto capacity = shard_capacity();
    const auto turns_kept = turns_kept_.load();
    std::uint64_t number = 0;
    std::uint32_t first_turn_blocks = 0;
    {
      std::lock_guard lock(shard.mutex);
      auto found = shard.by_key.find(stored);
      std::list<Entry>::iterator entry;
      if (found == shard.by_key.end()) {
        entry = insert_entry(shard, stored, key_hash, now_ms, capacity);
      } else {
        entry = found->second;
        shard.lru.splice(shard.lru.begin(), shard.lru, entry);  // iterators stay valid
        if (same_request && !entry->recent.empty() && entry->recent.back().number == entry->turns) {
          auto& last = entry->recent.back();
          last.worker = turn.worker;
          last.worker_position = turn.worker_position;
          last.reason = turn.reason;
          last.prefill_worker = turn.prefill_worker;
          last.prefill = turn.prefill;
          last.predicted_cached_tokens = turn.predicted_cached_tokens;
          last.kv_usage = turn.kv_usage;
          entry->worker = std::move(turn.worker);
          entry->worker_position = turn.worker_position;
          entry->last_seen_ms = now_ms;
          return entry->turns;
        }
        if (expired(entry->last_seen_ms, now_ms, idle_ttl_ms_.load())) {
          start_over(*entry, now_ms);
        }
      }
      if (entry->turns == 0) {
        entry->first_turn_blocks = static_cast<std::uint32_t>(blocks.size());
        if (parent && *parent != entry->key) {
          entry->parent = *parent;
        } else {
          parent.reset();
        }
      } else {
        parent.reset();  // another request made it a session first
      }
      first_turn_blocks = entry->first_turn_blocks;
      entry->turns += 1;
      entry->last_seen_ms = now_ms;
      entry->key_source.assign(key_source);
      entry->last_input_tokens = turn.input_tokens;
      entry->last_answer_tokens.reset();
      entry->last_answered_ms.reset();
      entry->worker = turn.worker;
      entry->worker_position = turn.worker_position;
      turn.number = entry->turns;
      turn.at_ms = now_ms;
      entry->recent.push_back(std::move(turn));
      while (entry->recent.size() > turns_kept) {
        entry->recent.pop_front();
      }
      number = entry->turns;
    }
    if (parent) {
      with_entry(*parent, [](Entry* found) {
        if (found != nullptr) {
          ++found->children;
        }
        return 0;
      });
    }
    if (!blocks.empty()) {
      register_anchors(key_hash, blocks, first_turn_blocks, now_ms);
    }
    return number;
  });
}

std::list<SessionTable::Entry>::iterator SessionTable::insert_entry(Shard& shard, std::string_view stored,
                                                                    std::uint64_t key_hash, std::uint64_t now_ms,
                                                                    std::size_t capacity) {
  while (shard.lru.size() >= capacity) {
    shard.by_key.erase(std::string_view(shard.lru.back().key));
    shard.by_hash.erase(key_hash_of(shard.lru.back().key));
    shard.lru.pop_back();
  }
  shard.lru.push_front(Entry{std::string(stored), now_ms, now_ms, 0, 0, {}, 0, {}, {}, {}, 0, 0, {}});
  auto entry = shard.lru.begin();
  shard.by_key.emplace(std::string_view(entry->key), entry);
  shard.by_hash.insert_or_assign(key_hash, entry);
  return entry;
}

void SessionTable::start_over(Entry& entry, std::uint64_t now_ms) {
  entry.turns = 0;
  entry.started_ms = now_ms;
  entry.recent.clear();
  entry.parent.clear();
  entry.children = 0;
}

bool SessionTable::apply_peer_turn(std::string_view key, SessionTurn turn, std::uint64_t now_ms, bool retry,
                                   std::string_view key_source) {
  return with_stored_key(key, [&](std::string_view stored) -> bool {
    auto& shard = shard_for(stored);
    const auto capacity = shard_capacity();
    const auto turns_kept = turns_kept_.load();
    const auto at_ms = std::min(turn.at_ms, now_ms);
    std::lock_guard lock(shard.mutex);
    auto found = shard.by_key.find(stored);
    std::list<Entry>::iterator entry;
    if (found == shard.by_key.end()) {
      entry = insert_entry(shard, stored, key_hash_of(stored), at_ms, capacity);
    } else {
      entry = found->second;
      if (expired(entry->last_seen_ms, at_ms, idle_ttl_ms_.load())) {
        start_over(*entry, at_ms);
      }
    }
    const bool replaces_last = retry && !entry->recent.empty() && entry->recent.back().number == turn.number;
    if (!replaces_last && turn.number <= entry->turns) {
      return false;
    }
    shard.lru.splice(shard.lru.begin(), shard.lru, entry);
    entry->last_seen_ms = std::max(entry->last_seen_ms, at_ms);
    entry->worker = turn.worker;
    entry->worker_position = turn.worker_position;
    entry->last_input_tokens = turn.input_tokens;
    entry->last_answer_tokens.reset();
    entry->last_answered_ms.reset();
    entry->key_source.assign(key_source);
    turn.at_ms = at_ms;
    if (replaces_last) {
      entry->recent.back() = std::move(turn);
      return true;
    }
    entry->turns = turn.number;
    entry->recent.push_back(std::move(turn));
    while (entry->recent.size() > turns_kept) {
      entry->recent.pop_front();
    }
    return true;
  });
}

void SessionTable::record_outcome(std::string_view key, std::uint64_t number, const Outcome& outcome) {
  with_entry(key, [&](Entry* found) {
    if (found == nullptr) {
      return 0;
    }
    for (auto& turn : found->recent) {
      if (turn.number == number) {
        turn.status = outcome.status;
        turn.cached_tokens = outcome.cached_tokens;
        turn.prompt_tokens = outcome.prompt_tokens;
        turn.ttft_ms = outcome.ttft_ms;
        turn.decode_ms = outcome.decode_ms;
      }
    }
    return 0;
  });
}

void SessionTable::record_answer(std::string_view key, std::uint64_t number, std::optional<std::uint32_t> answer_tokens,
                                 std::uint64_t now_ms) {
  with_entry(key, [&](Entry* found) {
    if (found != nullptr && found->turns == number) {
      found->last_answer_tokens = answer_tokens;
      found->last_answered_ms = now_ms;
    }
    return 0;
  });
}

std::optional<SessionDetail> SessionTable::detail(std::string_view key, std::uint64_t now_ms) const {
  return with_entry(key, [&](const Entry* entry) -> std::optional<SessionDetail> {
    if (entry == nullptr) {
      return std::nullopt;
    }
    SessionDetail detail;
    detail.key = entry->key;
    detail.key_source = entry->key_source;
    detail.parent = entry->parent;
    detail.children = entry->children;
    detail.state = state_of(*entry, now_ms);
    detail.started_ms = entry->started_ms;
    detail.turns.assign(entry->recent.begin(), entry->recent.end());
    return detail;
  });
}

std::size_t SessionTable::size() const {
  std::size_t total = 0;
  for (const auto& shard : shards_) {
    std::lock_guard lock(shard.mutex);
    total += shard.lru.size();
  }
  return total;
}

std::size_t SessionTable::anchors() const {
  std::size_t total = 0;
  for (const auto& shard : anchors_) {
    std::lock_guard lock(shard.mutex);
    total += shard.owners.size();
  }
  return total;
}

std::size_t SessionTable::active(std::uint64_t now_ms) const {
  const auto ttl = idle_ttl_ms_.load();
  std::size_t total = 0;
  for (const auto& shard : shards_) {
    std::lock_guard lock(shard.mutex);
    // Most recently used first: stop at the first expired entry.
    for (const auto& entry : shard.lru) {
      if (expired(entry.last_seen_ms, now_ms, ttl)) {
        break;
      }
      ++total;
    }
  }
  return total;
}

std::vector<SessionTable::Summary> SessionTable::recent(std::size_t limit, std::uint64_t now_ms) const {
  const auto ttl = idle_ttl_ms_.load();
  std::vector<Summary> summaries;
  for (const auto& shard : shards_) {
    std::lock_guard lock(shard.mutex);
    std::size_t taken = 0;
    for (const auto& entry : shard.lru) {
      if (taken == limit || expired(entry.last_seen_ms, now_ms, ttl)) {
        break;
      }
      summaries.push_back({state_of(entry, now_ms), entry.key, entry.key_source, entry.parent, entry.started_ms,
                           entry.recent.empty() ? std::nullopt : std::optional<SessionTurn>(entry.recent.back())});
      ++taken;
    }
  }
  std::sort(summaries.begin(), summaries.end(),
            [](const Summary& a, const Summary& b) { return a.state.last_seen_ms > b.state.last_seen_ms; });
  if (summaries.size() > limit) {
    summaries.resize(limit);
  }
  return summaries;
}

}  // namespace kvgate::route
