#include "kvgate/kv_events/worker_caches.hpp"

#include "kvgate/prefix/block_hash.hpp"

namespace kvgate::kv_events {
namespace {

using index::Tier;

std::size_t tier_number(Tier tier) {
  return tier == Tier::gpu ? 0 : 1;
}

std::uint32_t seconds(std::uint64_t now_ms) {
  return static_cast<std::uint32_t>(now_ms / 1000);
}

}  // namespace

// vLLM's GPU tier is "GPU"; its offloading connectors and SGLang's host
// cache report other names ("CPU", "cpu_tier", ...): all count as offloaded.
Tier tier_of(const std::string& medium) {
  return medium == "GPU" || medium == "gpu" ? Tier::gpu : Tier::offloaded;
}

WorkerCaches::Worker& WorkerCaches::worker(WorkerSlot slot) {
  auto& state = workers_[slot];
  if (!state) {
    state = std::make_unique<Worker>();
    const auto& config = slot_configs_[slot];
    if (config.slots > 0) {
      state->sequences = std::make_unique<SequenceSlots>(config.slots, config.min_similarity, config.ram_blocks);
    }
  }
  return *state;
}

void WorkerCaches::set_sequence_slots(WorkerSlot slot, std::uint32_t slots, double min_similarity,
                                      std::uint64_t max_busy_ms, std::uint64_t ram_blocks) {
  auto& config = slot_configs_[slot];
  const bool changed =
      config.slots != slots || config.min_similarity != min_similarity || config.ram_blocks != ram_blocks;
  const bool same_slots = config.slots == slots && slots > 0;
  config = {slots, min_similarity, max_busy_ms, ram_blocks};
  if (!changed || !workers_[slot]) {
    return;
  }
  auto& state = *workers_[slot];
  if (same_slots && state.sequences) {
    // The same slots with another similarity threshold or RAM cache (its
    // answers showed llama-server keeps none): what the slots hold and run
    // is still so, and must not be forgotten mid-traffic.
    state.sequences->reconfigure(min_similarity, ram_blocks, slot_changes_);
    apply_slot_changes(slot, state, 0);
    return;
  }
  drop_worker(slot);
}

const SequenceSlots* WorkerCaches::sequence_slots(WorkerSlot slot) const {
  const auto& state = workers_[slot];
  return state ? state->sequences.get() : nullptr;
}

// The index credits the worker with a block exactly while an idle slot
// holds it; a block may have gone both ways within one change.
void WorkerCaches::apply_slot_changes(WorkerSlot slot, Worker& state, std::uint64_t now_ms, AssumeResult* result) {
  const auto& slots = *state.sequences;
  // The idle slots on the GPU tier (aged for the eviction term), the RAM
  // cache on the offloaded tier (loaded back instead of computed).
  apply_tier_changes(
      slot, state, Tier::gpu, slot_changes_.credit, slot_changes_.uncredit,
      [&](BlockHash block) { return slots.credits(block); }, now_ms, result);
  apply_tier_changes(
      slot, state, Tier::offloaded, slot_changes_.ram_credit, slot_changes_.ram_uncredit,
      [&](BlockHash block) { return slots.ram_credits(block); }, now_ms, result);
  slot_changes_.clear();
}

template <class Holds>
void WorkerCaches::apply_tier_changes(WorkerSlot slot, Worker& state, Tier tier, std::span<const BlockHash> credit,
                                      std::span<const BlockHash> uncredit, Holds holds, std::uint64_t now_ms,
                                      AssumeResult* result) {
  const bool gpu = tier == Tier::gpu;
  scratch_.clear();
  for (auto block : credit) {
    if (holds(block)) {
      scratch_.push_back(block);
      if (gpu) {
        state.recency.touch(block, now_ms);
      }
    }
  }
  const auto evicted = index_.insert(slot, scratch_, tier, seconds(now_ms));
  if (result != nullptr) {
    result->evicted_entries += evicted;
  }
  scratch_.clear();
  for (auto block : uncredit) {
    if (!holds(block)) {
      scratch_.push_back(block);
      if (gpu) {
        state.recency.forget(block);
      }
    }
  }
  index_.remove(slot, scratch_, tier);
}

void WorkerCaches::finish(WorkerSlot slot, std::uint64_t ticket, std::uint64_t now_ms,
                          std::optional<std::uint32_t> reported_blocks) {
  auto& state = worker(slot);
  if (!state.sequences) {
    return;
  }
  state.sequences->finish(ticket, now_ms, slot_changes_, reported_blocks);
  apply_slot_changes(slot, state, now_ms);
}

ApplyStats WorkerCaches::apply(WorkerSlot slot, const EventBatch& batch, std::uint64_t now_ms) {
  ApplyStats stats;
  for (const auto& event : batch.events) {
    if (const auto* stored = std::get_if<BlockStored>(&event)) {
      store(slot, *stored, now_ms, stats);
    } else if (const auto* removed = std::get_if<BlockRemoved>(&event)) {
      remove(slot, *removed, stats);
    } else {
      // AllBlocksCleared: the engine reset its prefix cache, so neither what
      // it reported nor what the gateway assumed is there any more.
      ++stats.cleared;
      if (workers_[slot]) {
        stats.gpu_evicted_blocks += workers_[slot]->engine[tier_number(Tier::gpu)].size();
      }
      drop_worker(slot);
    }
    if (stats.over_limit) {
      break;
    }
  }
  return stats;
}

const WorkerCaches::EngineBlock* WorkerCaches::find_parent(const Worker& state, EngineHash parent, Tier tier,
                                                           bool local, std::uint32_t group) const {
  // The parent normally sits on the same tier; an offloaded copy may chain
  // from a GPU parent (or the reverse), so the other tier is tried too. A
  // local group's block may continue a block that group never stored (a
  // request that hit skips the blocks before its window): the full group's
  // copy has the same chained hash.
  for (bool own_group : {true, false}) {
    if (!own_group && !local) {
      break;
    }
    const auto key = own_group && local ? local_engine_key(parent, group) : parent;
    for (auto number : {tier_number(tier), 1 - tier_number(tier)}) {
      auto found = state.engine[number].find(key);
      if (found != state.engine[number].end()) {
        return &found->second;
      }
    }
  }
  return nullptr;
}

// The events name each block's cache group and its kind (vLLM's hybrid KV
// cache manager; vllm/distributed/kv_events.py BlockStored.group_idx,
// kv_cache_spec_kind, kv_cache_spec_sliding_window). Without a kind, group
// 0 is full attention and any other group the configured local attention.
WorkerCaches::GroupUse WorkerCaches::group_use(std::optional<std::uint32_t> group,
                                               const std::optional<std::string>& kind,
                                               std::optional<std::uint32_t> window) {
  const auto number = group.value_or(0);
  auto* learned = number < kMaxGroups ? &groups_[number] : nullptr;
  if (kind) {
    auto use = GroupUse::unusable;
    // The local layout this group stands for: a sliding window its event
    // names, or chunks whose size the event may name and the configuration
    // otherwise gives (Llama 4's attention_chunk_size).
    std::optional<prefix::LocalAttention> local;
    if (*kind == "full_attention" || *kind == "mla_attention" || *kind == "sink_full_attention") {
      use = GroupUse::full;
      if (!attention_.reported()) {
        attention_.report({});  // full attention, so far
      }
    } else if ((*kind == "sliding_window" || *kind == "sliding_window_mla") && window.value_or(0) >= 2) {
      local = prefix::LocalAttention{prefix::AttentionKind::sliding_window, *window};
    } else if (*kind == "chunked_local_attention") {
      const auto configured = attention_.configured();
      const auto chunk =
          window.value_or(configured.kind == prefix::AttentionKind::chunked_local ? configured.tokens : 0);
      if (chunk >= 2) {
        local = prefix::LocalAttention{prefix::AttentionKind::chunked_local, chunk};
      }
    }
    if (local) {
      const auto current = attention_.reported();
      if (!current || !current->hybrid() || (current->kind == local->kind && current->tokens == local->tokens)) {
        use = GroupUse::local;
      }  // else a second kind or size: one kind of local attention is modelled
    }
    if (learned != nullptr) {
      *learned = use;
    }
    note_local(number, use);
    if (use == GroupUse::local) {
      const prefix::LocalAttention reported{local->kind, local->tokens, local_groups()};
      if (attention_.reported() != reported) {
        attention_.report(reported);
      }
    }
    return use;
  }
  if (learned != nullptr && *learned != GroupUse::unseen) {
    return *learned;
  }
  if (number == 0) {
    return GroupUse::full;
  }
  const auto use = attention_.configured().hybrid() ? GroupUse::local : GroupUse::unusable;
  note_local(number, use);
  return use;
}

void WorkerCaches::note_local(std::uint32_t group, GroupUse use) {
  if (use == GroupUse::local && group < kMaxGroups) {
    local_groups_ |= std::uint64_t{1} << group;
  }
}

// A stored block's request held every block it continues: in vLLM those
// blocks go back to the free queue when that request ends, and SGLang
// stamps the matched path's last access, so they are as recently used as
// the new block. A hit leaves no event of its own, so this is how a
// gateway learns that requests routed by others reused a chain. A walk
// stops at a block whose chain it already refreshed in this tick.
std::uint32_t WorkerCaches::touch_chain(Worker& state, EngineHash parent, std::uint64_t now_ms) {
  auto& blocks = state.engine[tier_number(Tier::gpu)];
  const auto now_tick = static_cast<std::uint32_t>(now_ms / BlockRecency::kTickMs);
  auto found = blocks.find(parent);
  if (found == blocks.end()) {
    return now_tick;
  }
  if (found->second.chain_tick + kChainRefreshTicks > now_tick) {
    return found->second.chain_tick;
  }
  // A chain's length is bounded by the blocks the worker holds; the bound
  // also ends a cycle a broken publisher could report.
  for (std::size_t steps = blocks.size(); steps > 0 && found != blocks.end(); --steps) {
    auto& block = found->second;
    if (!block.indexed || block.chain_tick == now_tick) {
      break;
    }
    block.chain_tick = now_tick;
    state.recency.touch(block.kvgate_hash, now_ms);
    if (!block.has_parent) {
      break;
    }
    found = blocks.find(block.parent);
  }
  return now_tick;
}

void WorkerCaches::store(WorkerSlot slot, const BlockStored& event, std::uint64_t now_ms, ApplyStats& stats) {
  const auto use = group_use(event.group_idx, event.spec_kind, event.sliding_window);
  if (use == GroupUse::unusable) {
    stats.unknown_group_blocks += event.block_hashes.size();
    if (!stats.unknown_group) {
      stats.unknown_group = event.group_idx.value_or(0);
      stats.unknown_group_kind = event.spec_kind.value_or("");
    }
    return;
  }
  const bool local = use == GroupUse::local;
  const auto group = event.group_idx.value_or(0);
  auto& state = worker(slot);
  const auto tier = tier_of(event.medium);
  const auto number = tier_number(tier);
  // Whether these blocks can be matched by a request, and the hash chain
  // they continue.
  // An adapter's blocks named by number only (SGLang's lora_id, vLLM's
  // before lora_name) belong to a partition kvgate cannot name: never the
  // base model's.
  const bool unnamed_adapter = event.lora_id.value_or(0) != 0 && !event.lora_name;
  bool indexable = event.block_size == limits_.block_size && !event.unreproducible_extra_keys && !unnamed_adapter;
  BlockHash chain = 0;
  if (event.parent_block_hash) {
    const auto* parent = find_parent(state, *event.parent_block_hash, tier, local, group);
    indexable = indexable && parent != nullptr && parent->indexed;
    chain = parent != nullptr ? parent->kvgate_hash : 0;
  } else {
    chain = prefix::partition_seed({model_, event.lora_name.value_or(""), event.cache_salt.value_or("")});
  }
  auto chain_tick = static_cast<std::uint32_t>(now_ms / BlockRecency::kTickMs);
  if (indexable && event.parent_block_hash && tier == Tier::gpu && !local) {
    chain_tick = touch_chain(state, *event.parent_block_hash, now_ms);
  }
  scratch_.clear();
  for (std::size_t block = 0; block < event.block_hashes.size(); ++block) {
    if (indexable) {
      chain = prefix::hash_block(chain, std::span(event.token_ids).subspan(block * event.block_size, event.block_size));
    }
    const auto engine_hash = event.block_hashes[block];
    auto [entry, added] = state.engine[number].try_emplace(local ? local_engine_key(engine_hash, group) : engine_hash);
    if (!added && entry->second.indexed != indexable) {
      // The same engine hash now means something else to us: keep the
      // newer meaning only once the older copies are gone.
      continue;
    }
    entry->second.kvgate_hash = chain;
    entry->second.local = local;
    entry->second.indexed = indexable;
    entry->second.has_parent = block > 0 || event.parent_block_hash.has_value();
    entry->second.chain_tick = chain_tick;
    entry->second.parent = block > 0 ? event.block_hashes[block - 1] : event.parent_block_hash.value_or(0);
    ++entry->second.copies;
    ++stats.stored_blocks;
    if (!indexable) {
      ++stats.unindexable_blocks;
      continue;
    }
    // confirmed counts distinct engine hashes (copies are counted above);
    // the index insert also refreshes blocks the cap may have dropped.
    const auto key = entry->second.index_key();
    // A local block counts once every local group holds it (vLLM looks a
    // block up in all groups of one kind together).
    auto& groups_holding = state.confirmed[number][key];
    groups_holding += added ? 1 : 0;
    if (groups_holding < (local ? local_groups() : 1)) {
      continue;
    }
    if (tier == Tier::gpu) {
      forget_assumption(state, key);  // confirmed: from now on the events decide
      state.recency.touch(key, now_ms);
    }
    scratch_.push_back(key);
  }
  stats.evicted_entries += index_.insert(slot, scratch_, tier, seconds(now_ms));
  if (state.engine[number].size() > limits_.max_engine_blocks) {
    stats.over_limit = true;
    drop_worker(slot);
  }
}

void WorkerCaches::remove(WorkerSlot slot, const BlockRemoved& event, ApplyStats& stats) {
  const auto use = group_use(event.group_idx, std::nullopt, std::nullopt);
  if (use == GroupUse::unusable) {
    stats.unknown_group_blocks += event.block_hashes.size();
    if (!stats.unknown_group) {
      stats.unknown_group = event.group_idx.value_or(0);
    }
    return;
  }
  const bool local = use == GroupUse::local;
  const auto group = event.group_idx.value_or(0);
  auto& state = worker(slot);
  const auto tier = tier_of(event.medium);
  const auto number = tier_number(tier);
  for (auto engine_hash : event.block_hashes) {
    auto found = state.engine[number].find(local ? local_engine_key(engine_hash, group) : engine_hash);
    if (found == state.engine[number].end()) {
      ++stats.unknown_removals;
      continue;
    }
    ++stats.removed_blocks;
    stats.gpu_evicted_blocks += tier == Tier::gpu ? 1 : 0;
    auto block = found->second;
    if (--found->second.copies > 0) {
      continue;
    }
    state.engine[number].erase(found);
    if (!block.indexed) {
      continue;
    }
    const auto key = block.index_key();
    auto confirmed = state.confirmed[number].find(key);
    if (confirmed == state.confirmed[number].end()) {
      continue;
    }
    const auto required = block.local ? local_groups() : 1;
    const bool was_credited = confirmed->second >= required;
    const auto remaining = --confirmed->second;
    if (remaining == 0) {
      state.confirmed[number].erase(confirmed);
    }
    if (!was_credited || remaining >= required) {
      continue;
    }
    const bool still_assumed = tier == Tier::gpu && state.assumed.contains(key);
    if (!still_assumed) {
      index_.remove(slot, std::span(&key, 1), tier);
      if (tier == Tier::gpu) {
        state.recency.forget(key);
      }
    }
  }
}

WorkerCaches::AssumeResult WorkerCaches::assume(WorkerSlot slot, std::span<const BlockHash> blocks,
                                                std::uint64_t now_ms, std::uint64_t ttl_ms,
                                                std::uint64_t capacity_blocks, std::uint64_t ticket) {
  auto& state = worker(slot);
  AssumeResult result;
  if (state.sequences) {
    for (auto block : blocks) {
      result.new_blocks += index_.holds(slot, block) ? 0 : 1;
    }
    state.sequences->start(blocks, ticket, now_ms, slot_changes_);
    apply_slot_changes(slot, state, now_ms, &result);
    return result;
  }
  const auto attention = attention_.effective();
  // The engine's hit on a hybrid model, before this request's own blocks
  // are credited: the local group's blocks it will compute start there.
  std::uint32_t hit = 0;
  if (attention.hybrid()) {
    while (hit < blocks.size() && index_.holds(slot, blocks[hit])) {
      ++hit;
    }
    hit = prefix::hybrid_hit_blocks(attention, limits_.block_size, hit, [&](std::uint32_t position) {
      return index_.holds(slot, prefix::local_group_key(blocks[position]));
    });
  }
  const auto& confirmed = state.confirmed[tier_number(Tier::gpu)];
  for (auto block : blocks) {
    result.new_blocks += index_.holds(slot, block) ? 0 : 1;
    state.recency.touch(block, now_ms);  // the routed request uses every block of its prompt
    if (!confirmed.contains(block)) {    // else the events vouch for it, and will report its removal
      assume_key(state, block, 1, now_ms + ttl_ms, ticket);
    }
  }
  // Refreshes recency of blocks already held too, so the cap keeps hot ones.
  result.evicted_entries = index_.insert(slot, blocks, Tier::gpu, seconds(now_ms));
  if (attention.hybrid()) {
    assume_local(slot, state, blocks, hit, now_ms, ttl_ms, ticket, result);
  }
  // The worker's cache is full: what it held longest is what it evicts.
  while (state.assumed_weight > capacity_blocks && !state.assumed_order.empty()) {
    unassume(slot, state, state.assumed_order.front());
    ++result.evicted_entries;
  }
  return result;
}

// The local group's copies of a routed prompt. The engine computes them
// from its hit on (`hit`, in blocks) and reads the window (or the chunk)
// before the hit; the blocks before that are not touched. The blocks the
// prefill passes are freed as it goes (vLLM's remove_skipped_blocks) but
// stay cached until the pool reuses them, so they are assumed too.
void WorkerCaches::assume_local(WorkerSlot slot, Worker& state, std::span<const BlockHash> blocks, std::uint32_t hit,
                                std::uint64_t now_ms, std::uint64_t ttl_ms, std::uint64_t ticket,
                                AssumeResult& result) {
  const auto attention = attention_.effective();
  std::uint64_t first_read_token = 0;
  const std::uint64_t hit_tokens = std::uint64_t{hit} * limits_.block_size;
  if (attention.kind == prefix::AttentionKind::sliding_window) {
    const std::uint64_t window_blocks = (attention.tokens - 1 + limits_.block_size - 1) / limits_.block_size;
    first_read_token = (hit > window_blocks ? hit - window_blocks : 0) * std::uint64_t{limits_.block_size};
  } else {
    first_read_token = hit_tokens / attention.tokens * attention.tokens;
  }
  const auto& confirmed = state.confirmed[tier_number(Tier::gpu)];
  local_scratch_.clear();
  for (auto position = first_read_token / limits_.block_size; position < blocks.size(); ++position) {
    const auto key = prefix::local_group_key(blocks[position]);
    result.new_blocks += index_.holds(slot, key) ? 0 : 1;
    state.recency.touch(key, now_ms);
    local_scratch_.push_back(key);
    if (!confirmed.contains(key)) {
      assume_key(state, key, std::max(1u, std::max(attention.groups, local_groups())), now_ms + ttl_ms, ticket);
    }
  }
  result.evicted_entries += index_.insert(slot, local_scratch_, Tier::gpu, seconds(now_ms));
}

std::uint64_t WorkerCaches::withdraw(WorkerSlot slot, std::span<const BlockHash> blocks, std::uint64_t ticket,
                                     std::uint64_t now_ms) {
  auto& state = worker(slot);
  std::uint64_t withdrawn = 0;
  if (state.sequences) {
    state.sequences->withdraw(ticket, now_ms, slot_changes_);
    withdrawn = slot_changes_.uncredit.size() + slot_changes_.credit.size();
    apply_slot_changes(slot, state, now_ms);
    return withdrawn;
  }
  const bool hybrid = attention_.effective().hybrid();
  for (auto block : blocks) {
    for (auto key : {block, prefix::local_group_key(block)}) {
      auto found = state.assumed.find(key);
      if (found != state.assumed.end() && found->second.ticket == ticket) {
        unassume(slot, state, key);
        ++withdrawn;
      }
      if (!hybrid) {
        break;
      }
    }
  }
  return withdrawn;
}

void WorkerCaches::assume_key(Worker& state, BlockHash key, std::uint32_t weight, std::uint64_t expires_ms,
                              std::uint64_t ticket) {
  auto [entry, added] = state.assumed.try_emplace(key);
  if (added) {
    state.assumed_weight += weight;
  } else {
    state.assumed_order.erase(entry->second.position);
    weight = entry->second.weight;
  }
  state.assumed_order.push_back(key);
  const auto creator = added ? ticket : entry->second.ticket;
  entry->second = {expires_ms, std::prev(state.assumed_order.end()), creator, weight};
}

void WorkerCaches::forget_assumption(Worker& state, BlockHash block) {
  auto found = state.assumed.find(block);
  if (found != state.assumed.end()) {
    state.assumed_weight -= found->second.weight;
    state.assumed_order.erase(found->second.position);
    state.assumed.erase(found);
  }
}

void WorkerCaches::unassume(WorkerSlot slot, Worker& state, BlockHash block) {
  auto found = state.assumed.find(block);
  state.assumed_weight -= found->second.weight;
  state.assumed_order.erase(found->second.position);
  state.assumed.erase(found);
  if (!state.confirmed[tier_number(Tier::gpu)].contains(block)) {
    index_.remove(slot, std::span(&block, 1), Tier::gpu);
    state.recency.forget(block);
  }
}

// Assumptions are kept in order of their last refresh; with one TTL per
// worker that is also the order of expiry. (When a worker's TTL changes, a
// newer assumption may outlive its time until older ones expire.)
void WorkerCaches::expire(std::uint64_t now_ms) {
  for (std::size_t slot = 0; slot < workers_.size(); ++slot) {
    if (!workers_[slot]) {
      continue;
    }
    auto& state = *workers_[slot];
    if (state.sequences) {
      state.sequences->expire(now_ms, slot_configs_[slot].max_busy_ms, slot_changes_);
      apply_slot_changes(static_cast<WorkerSlot>(slot), state, now_ms);
      continue;
    }
    while (!state.assumed_order.empty() &&
           state.assumed.find(state.assumed_order.front())->second.expires_ms <= now_ms) {
      unassume(static_cast<WorkerSlot>(slot), state, state.assumed_order.front());
    }
  }
}

void WorkerCaches::forget_confirmed(WorkerSlot slot) {
  auto& state = worker(slot);
  for (std::size_t number = 0; number < 2; ++number) {
    scratch_.clear();
    for (const auto& [block, copies] : state.confirmed[number]) {
      if (number == 1 || !state.assumed.contains(block)) {
        scratch_.push_back(block);
        if (number == 0) {
          state.recency.forget(block);
        }
      }
    }
    index_.remove(slot, scratch_, number == 0 ? Tier::gpu : Tier::offloaded);
    state.confirmed[number].clear();
    state.engine[number].clear();
  }
}

void WorkerCaches::drop_worker(WorkerSlot slot) {
  index_.drop_worker(slot);
  workers_[slot].reset();
}

void WorkerCaches::engine_restarted(WorkerSlot slot, std::uint64_t now_ms) {
  auto& entry = workers_[slot];
  if (!entry || !entry->sequences) {
    drop_worker(slot);
    return;
  }
  entry->sequences->engine_restarted(slot_changes_);
  apply_slot_changes(slot, *entry, now_ms);
}

std::uint64_t WorkerCaches::engine_blocks(WorkerSlot slot) const {
  const auto& state = workers_[slot];
  return state ? state->engine[0].size() + state->engine[1].size() : 0;
}

// Assumptions never cover a confirmed block (assume() skips those, a
// BlockStored ends the assumption), so the two sets add up.
std::uint64_t WorkerCaches::gpu_blocks(WorkerSlot slot) const {
  const auto& state = workers_[slot];
  if (state && state->sequences) {
    return state->sequences->credited_blocks();
  }
  return state ? state->confirmed[0].size() + state->assumed.size() : 0;
}

policy::AgeHistogram WorkerCaches::gpu_block_ages(WorkerSlot slot, std::uint64_t now_ms) const {
  const auto& state = workers_[slot];
  return state ? state->recency.ages(now_ms) : policy::AgeHistogram{};
}

std::uint64_t WorkerCaches::assumed_blocks(WorkerSlot slot) const {
  const auto& state = workers_[slot];
  return state ? state->assumed.size() : 0;
}

}  // namespace kvgate::kv_events
