#include "engine.hpp"

#include <algorithm>
#include <cassert>
#include <iterator>

namespace kvgate::sim {
namespace {

std::uint32_t blocks_for(std::uint64_t tokens, std::uint32_t block_size) {
  return static_cast<std::uint32_t>((tokens + block_size - 1) / block_size);
}

}  // namespace

TokenId filler_token(std::uint32_t output_index) {
  return 100 + output_index % 1000;
}

Engine::Engine(std::uint32_t num_blocks, std::uint32_t block_size, EngineLimits limits, StepCost cost)
    : pool_(num_blocks, block_size), limits_(limits), cost_(cost) {
  pool_.enable_cpu_tier(limits.cpu_offload_blocks);
  if (hybrid()) {
    pool_.describe_groups(limits_.groups);
  }
  if (limits.slots > 0) {
    slots_.emplace(limits.slots, limits.slot_similarity, limits.slot_ram_tokens);
    limits_.max_num_seqs = limits.slots;  // one request per slot; the rest are deferred
  }
}

RequestHandle Engine::add(NewRequest spec) {
  assert(!spec.prompt.empty());
  auto request = std::make_unique<Request>();
  request->handle = next_handle_++;
  request->prompt_length = static_cast<std::uint32_t>(spec.prompt.size());
  request->tokens = std::move(spec.prompt);
  request->max_tokens = std::max<std::uint32_t>(1, spec.max_tokens);
  request->hash_seed = spec.hash_seed;
  request->cache_salt = spec.cache_salt;
  request->lora_name = spec.lora_name;
  request->external_tokens = spec.external_tokens;
  auto handle = request->handle;
  waiting_.push_back(request.get());
  requests_.emplace(handle, std::move(request));
  return handle;
}

void Engine::abort(RequestHandle handle) {
  auto found = requests_.find(handle);
  if (found == requests_.end()) {
    return;
  }
  auto* request = found->second.get();
  release_blocks(*request);
  std::erase(running_, request);
  std::erase(waiting_, request);
  requests_.erase(found);
}

StepReport Engine::step() {
  StepReport report;
  ++steps_;
  loading_blocks_ = 0;
  loading_adapters_ms_ = 0;
  std::uint32_t budget = limits_.max_num_batched_tokens;
  std::vector<Scheduled> scheduled;
  schedule_running(budget, scheduled, report);
  if (report.preemptions == 0) {
    admit_waiting(budget, scheduled);
  }
  for (const auto& [request, tokens] : scheduled) {
    if (request->computed < request->prompt_length) {
      report.prefill_tokens += tokens;
    } else {
      ++report.decode_sequences;
    }
    report.context_tokens += request->computed + tokens;
  }
  counters_.computed_prompt_tokens += report.prefill_tokens;
  report.duration_ms = cost_.overhead_ms + cost_.prefill_ms_per_token * report.prefill_tokens +
                       cost_.decode_ms_per_sequence * report.decode_sequences +
                       cost_.attention_ms_per_context_token * static_cast<double>(report.context_tokens) +
                       cost_.load_ms_per_offloaded_block * loading_blocks_ + loading_adapters_ms_;
  report.loaded_blocks = loading_blocks_;
  if (scheduled.empty()) {
    report.duration_ms = 0;
  }
  for (const auto& [request, tokens] : scheduled) {
    report.progress.push_back(advance(*request, tokens));
  }
  for (const auto& progress : report.progress) {
    if (progress.finished) {
      finish(*requests_.at(progress.request));
    }
  }
  return report;
}

void Engine::schedule_running(std::uint32_t& budget, std::vector<Scheduled>& scheduled, StepReport& report) {
  for (std::size_t index = 0; index < running_.size() && budget > 0;) {
    auto& request = *running_[index];
    auto wanted = std::min<std::uint32_t>(static_cast<std::uint32_t>(request.tokens.size()) - request.computed, budget);
    bool preempted_itself = false;
    free_skipped(request);
    while (!grow_blocks(request, request.computed + wanted)) {
      auto* victim = running_.back();  // the most recently admitted
      preempt(*victim);
      ++report.preemptions;
      if (victim == &request) {
        preempted_itself = true;
        break;
      }
    }
    if (preempted_itself) {
      break;
    }
    scheduled.push_back({&request, wanted});
    budget -= wanted;
    ++index;
  }
}

void Engine::admit_waiting(std::uint32_t& budget, std::vector<Scheduled>& scheduled) {
  // FCFS, except that a request whose adapter would be one too many in
  // the batch is passed over and keeps its place (vLLM's scheduler skips
  // it); a request that does not fit for tokens or blocks stops admission.
  for (std::size_t at = 0; at < waiting_.size() && running_.size() < limits_.max_num_seqs && budget > 0;) {
    auto& request = *waiting_[at];
    if (!adapter_fits(request)) {
      ++at;
      continue;
    }
    std::uint32_t tokens = 0;
    if (!try_admit(request, budget, tokens)) {
      break;  // nobody overtakes it
    }
    if (!request.lora_name.empty()) {
      load_adapter(request.lora_name);
    }
    waiting_.erase(waiting_.begin() + static_cast<std::ptrdiff_t>(at));
    running_.push_back(&request);
    scheduled.push_back({&request, tokens});
    budget -= tokens;
  }
}

bool Engine::try_admit_to_slot(Request& request, std::uint32_t budget, std::uint32_t& tokens) {
  auto grant = slots_->acquire(request.tokens);
  if (!grant) {
    return false;
  }
  const auto total = static_cast<std::uint32_t>(request.tokens.size());
  request.slot = grant->slot;
  request.computed = grant->cached_tokens;
  // A sequence restored from host RAM is copied back before the prefill.
  const auto block_size = pool_.block_size();
  loading_blocks_ += (grant->restored_tokens + block_size - 1) / block_size;
  counters_.offloaded_hit_tokens += grant->restored_tokens;
  tokens = std::min(total - request.computed, budget);
  counters_.prefix_queries_tokens += total;
  counters_.prefix_hit_tokens += request.computed;
  if (!request.cached_tokens) {
    request.cached_tokens = request.computed;
    counters_.prompt_tokens += request.prompt_length;
  }
  return true;
}

std::uint32_t Engine::sliding_hit(std::span<const BlockHash> hashes, std::uint32_t full_blocks) const {
  const auto block_size = pool_.block_size();
  const auto window = limits_.groups[1].window;
  // -1: the window includes the token being computed.
  const std::uint32_t needed = (window - 1 + block_size - 1) / block_size;
  auto held = [&](std::uint32_t position) {
    for (std::uint32_t group = 1; group < limits_.groups.size(); ++group) {
      if (!pool_.cached_block(hashes[position], group)) {
        return false;
      }
    }
    return true;
  };
  std::uint32_t contiguous = 0;
  for (auto position = static_cast<std::int64_t>(full_blocks) - 1; position >= 0; --position) {
    if (!held(static_cast<std::uint32_t>(position))) {
      contiguous = 0;
      continue;
    }
    if (++contiguous >= needed) {
      return static_cast<std::uint32_t>(position) + contiguous;
    }
  }
  return contiguous;  // the run from the first block, shorter than a window
}

bool Engine::try_admit_hybrid(Request& request, std::uint32_t budget, std::uint32_t& tokens) {
  const auto block_size = pool_.block_size();
  const auto total = static_cast<std::uint32_t>(request.tokens.size());
  auto hashes = prompt_hashes(request);
  auto reusable = std::min<std::size_t>(hashes.size(), (total - 1) / block_size);
  // vLLM's HybridKVCacheCoordinator: the full group's hit, then the
  // sliding groups' within it; the shorter is the hit of both.
  const auto full = pool_.find_cached_prefix(std::span(hashes).first(reusable), 0);
  const auto hit = sliding_hit(hashes, static_cast<std::uint32_t>(full.size()));
  const std::uint32_t window = limits_.groups[1].window;
  const std::uint32_t needed = (window - 1 + block_size - 1) / block_size;
  const auto window_start = hit > needed ? hit - needed : 0;
  const auto computed = hit * block_size;
  tokens = std::min(total - computed, budget);
  const auto positions = blocks_for(computed + tokens, block_size);
  const auto local_groups = static_cast<std::uint32_t>(limits_.groups.size() - 1);
  std::vector<BlockId> touched(full.begin(), full.begin() + hit);
  for (std::uint32_t group = 1; group <= local_groups; ++group) {
    for (auto position = window_start; position < hit; ++position) {
      touched.push_back(*pool_.cached_block(hashes[position], group));
    }
  }
  const auto new_blocks = (positions - hit) * (1 + local_groups);
  const auto hits_in_free_queue = static_cast<std::uint32_t>(
      std::count_if(touched.begin(), touched.end(), [&](BlockId block) { return pool_.ref_count(block) == 0; }));
  if (new_blocks > pool_.free_blocks() - hits_in_free_queue) {
    return false;
  }
  pool_.touch(touched);
  auto allocated = pool_.allocate(new_blocks);
  assert(allocated);
  auto next = allocated->begin();
  request.blocks.assign(full.begin(), full.begin() + hit);
  for (auto position = hit; position < positions; ++position) {
    request.blocks.push_back(*next++);
  }
  request.local_blocks.assign(local_groups, {});
  request.local_cached.assign(local_groups, hit);
  for (std::uint32_t group = 1; group <= local_groups; ++group) {
    auto& blocks = request.local_blocks[group - 1];
    blocks.assign(window_start, kNullBlock);
    for (auto position = window_start; position < hit; ++position) {
      blocks.push_back(*pool_.cached_block(hashes[position], group));
    }
    for (auto position = hit; position < positions; ++position) {
      blocks.push_back(*next++);
    }
  }
  request.cached_blocks = hit;
  request.hashes.assign(hashes.begin(), hashes.begin() + hit);
  request.computed = computed;
  counters_.prefix_queries_tokens += total;
  counters_.prefix_hit_tokens += computed;
  if (!request.cached_tokens) {
    request.cached_tokens = computed;
    counters_.prompt_tokens += request.prompt_length;
  }
  return true;
}

void Engine::free_skipped(Request& request) {
  if (!hybrid()) {
    return;
  }
  const auto block_size = pool_.block_size();
  const auto window = limits_.groups[1].window;
  const std::uint32_t skipped_tokens = request.computed + 1 > window ? request.computed + 1 - window : 0;
  const auto skipped_blocks = skipped_tokens / block_size;
  std::vector<BlockId> freed;
  for (auto& blocks : request.local_blocks) {
    // From the last block the window has passed down to the first already
    // freed one, freed in that order (vLLM).
    for (auto position = std::min<std::size_t>(skipped_blocks, blocks.size()); position-- > 0;) {
      if (blocks[position] == kNullBlock) {
        break;
      }
      freed.push_back(blocks[position]);
      blocks[position] = kNullBlock;
    }
  }
  pool_.release(freed);
}

bool Engine::try_admit(Request& request, std::uint32_t budget, std::uint32_t& tokens) {
  if (slots_) {
    return try_admit_to_slot(request, budget, tokens);
  }
  if (hybrid()) {
    return try_admit_hybrid(request, budget, tokens);
  }
  const auto block_size = pool_.block_size();
  const auto total = static_cast<std::uint32_t>(request.tokens.size());
  auto hashes = prompt_hashes(request);
  // At least the last known token is always computed (its logits are needed).
  auto reusable = std::min<std::size_t>(hashes.size(), (total - 1) / block_size);
  auto hit = pool_.find_cached_prefix(std::span(hashes).first(reusable));
  const auto offloaded = pool_.offloaded_run(std::span(hashes).first(reusable).subspan(hit.size()));
  // Blocks a prefill worker sent, beyond what this cache and its lower tier
  // hold (the transfer already happened: no load cost here).
  const auto external_blocks = std::min<std::size_t>(reusable, request.external_tokens / block_size);
  const auto local_blocks = hit.size() + offloaded;
  const auto received = external_blocks > local_blocks ? static_cast<std::uint32_t>(external_blocks - local_blocks) : 0;
  auto computed = (static_cast<std::uint32_t>(local_blocks) + received) * block_size;
  tokens = std::min(total - computed, budget);
  auto new_blocks = blocks_for(computed + tokens, block_size) - static_cast<std::uint32_t>(hit.size());
  auto hits_in_free_queue = static_cast<std::uint32_t>(
      std::count_if(hit.begin(), hit.end(), [&](BlockId block) { return pool_.ref_count(block) == 0; }));
  if (new_blocks > pool_.free_blocks() - hits_in_free_queue) {
    return false;
  }
  pool_.touch(hit);
  pool_.touch_offloaded(std::span(hashes).subspan(hit.size(), offloaded));
  loading_blocks_ += offloaded;
  counters_.offloaded_hit_tokens += offloaded * block_size;
  counters_.external_hit_tokens += received * block_size;
  request.external_tokens = 0;  // landed once: a preempted request recomputes
  auto allocated = pool_.allocate(new_blocks);
  assert(allocated);
  request.blocks = std::move(hit);
  request.blocks.insert(request.blocks.end(), allocated->begin(), allocated->end());
  request.cached_blocks = static_cast<std::uint32_t>(request.blocks.size() - allocated->size());
  request.hashes.assign(hashes.begin(), hashes.begin() + request.cached_blocks);
  request.computed = computed;
  counters_.prefix_queries_tokens += total;
  // vLLM's prefix-cache counter is the GPU cache's own; the connector's
  // loads are counted apart.
  counters_.prefix_hit_tokens += request.cached_blocks * block_size;
  if (!request.cached_tokens) {
    request.cached_tokens = computed;
    counters_.prompt_tokens += request.prompt_length;
  }
  return true;
}

bool Engine::grow_blocks(Request& request, std::uint32_t total_tokens) {
  if (slots_) {
    return true;  // a slot holds its context
  }
  auto needed = blocks_for(total_tokens, pool_.block_size());
  if (needed <= request.blocks.size()) {
    return true;
  }
  const auto more = needed - static_cast<std::uint32_t>(request.blocks.size());
  // Every group grows by the same positions, all or nothing.
  auto allocated = pool_.allocate(more * static_cast<std::uint32_t>(1 + request.local_blocks.size()));
  if (!allocated) {
    return false;
  }
  auto next = allocated->begin();
  request.blocks.insert(request.blocks.end(), next, next + more);
  for (auto& blocks : request.local_blocks) {
    next += more;
    blocks.insert(blocks.end(), next, next + more);
  }
  return true;
}

void Engine::preempt(Request& request) {
  release_blocks(request);
  request.computed = 0;
  request.cached_blocks = 0;
  request.hashes.clear();
  request.local_blocks.clear();
  request.local_cached.clear();
  std::erase(running_, &request);
  waiting_.push_front(&request);
  ++counters_.preemptions;
}

Progress Engine::advance(Request& request, std::uint32_t tokens) {
  request.computed += tokens;
  cache_full_blocks(request);
  Progress progress;
  progress.request = request.handle;
  progress.cached_tokens = request.cached_tokens.value_or(0);
  if (request.computed == request.tokens.size()) {
    request.tokens.push_back(filler_token(request.output_tokens));
    ++request.output_tokens;
    ++counters_.generation_tokens;
    progress.new_output_tokens = 1;
    progress.first_token = request.output_tokens == 1;
    progress.finished = request.output_tokens >= request.max_tokens;
  }
  return progress;
}

void Engine::cache_full_blocks(Request& request) {
  if (slots_) {
    return;  // llama.cpp keeps sequences in slots, not hashed blocks
  }
  const auto block_size = pool_.block_size();
  const auto full = request.computed / block_size;
  if (full <= request.cached_blocks) {
    return;
  }
  std::optional<BlockHash> parent;
  if (request.cached_blocks > 0) {
    parent = request.hashes.back();
  }
  auto chain = parent.value_or(request.hash_seed);
  const auto first = request.cached_blocks;
  for (auto block = first; block < full; ++block) {
    chain = prefix::hash_block(chain, std::span(request.tokens).subspan(block * block_size, block_size));
    request.hashes.push_back(chain);
  }
  pool_.cache_blocks(std::span(request.blocks).subspan(first, full - first),
                     std::span(request.hashes).subspan(first, full - first), parent,
                     std::span(request.tokens).subspan(first * block_size, (full - first) * block_size),
                     request.cache_salt, request.lora_name);
  request.cached_blocks = full;
  // The sliding-window groups cache the same positions, but for blocks they
  // never held (before a hit's window): vLLM skips null blocks.
  for (std::size_t group = 0; group < request.local_blocks.size(); ++group) {
    const auto& blocks = request.local_blocks[group];
    auto position = request.local_cached[group];
    while (position < full) {
      if (blocks[position] == kNullBlock) {
        ++position;
        continue;
      }
      auto end = position;
      while (end < full && blocks[end] != kNullBlock) {
        ++end;
      }
      pool_.cache_blocks(std::span(blocks).subspan(position, end - position),
                         std::span(request.hashes).subspan(position, end - position),
                         position > 0 ? std::optional(request.hashes[position - 1]) : std::nullopt,
                         std::span(request.tokens).subspan(position * block_size, (end - position) * block_size),
                         request.cache_salt, request.lora_name, static_cast<std::uint32_t>(group + 1));
      position = end;
    }
    request.local_cached[group] = full;
  }
}

void Engine::finish(Request& request) {
  release_blocks(request);
  std::erase(running_, &request);
  requests_.erase(request.handle);
}

void Engine::release_blocks(Request& request) {
  if (slots_) {
    if (request.slot) {
      // The slot keeps what it computed: the prompt and the generated
      // tokens but the last one sampled.
      slots_->release(*request.slot, std::span(request.tokens).first(request.computed), steps_);
      request.slot.reset();
    }
    return;
  }
  // Every group's blocks in allocation order, then freed in reverse: the
  // request's tail blocks are evicted first (vLLM).
  std::vector<BlockId> blocks(request.blocks.begin(), request.blocks.end());
  for (const auto& group : request.local_blocks) {
    std::copy_if(group.begin(), group.end(), std::back_inserter(blocks),
                 [](BlockId block) { return block != kNullBlock; });
  }
  std::vector<BlockId> reversed(blocks.rbegin(), blocks.rend());
  pool_.release(reversed);
  request.blocks.clear();
  request.local_blocks.clear();
  request.local_cached.clear();
}

std::uint32_t Engine::cached_prefix_tokens(std::span<const TokenId> prompt, BlockHash hash_seed) const {
  if (slots_ || prompt.empty()) {
    return 0;
  }
  const auto block_size = pool_.block_size();
  auto hashes = prefix::hash_blocks(prompt, block_size, hash_seed);
  const auto reusable = std::min<std::size_t>(hashes.size(), (prompt.size() - 1) / block_size);
  return static_cast<std::uint32_t>(pool_.find_cached_prefix(std::span(hashes).first(reusable)).size()) * block_size;
}

std::vector<BlockHash> Engine::prompt_hashes(const Request& request) const {
  return prefix::hash_blocks(request.tokens, pool_.block_size(), request.hash_seed);
}

bool Engine::adapter_fits(const Request& request) const {
  if (request.lora_name.empty() || limits_.max_loras == 0) {
    return true;
  }
  // A batch mixes at most max_loras adapters (vLLM's scheduler skips a
  // request whose adapter would be one more).
  std::vector<std::string_view> in_batch;
  for (const auto* running : running_) {
    if (!running->lora_name.empty() &&
        std::find(in_batch.begin(), in_batch.end(), running->lora_name) == in_batch.end()) {
      in_batch.push_back(running->lora_name);
    }
  }
  return std::find(in_batch.begin(), in_batch.end(), request.lora_name) != in_batch.end() ||
         in_batch.size() < limits_.max_loras;
}

void Engine::load_adapter(const std::string& name) {
  if (auto found = std::find(gpu_adapters_.begin(), gpu_adapters_.end(), name); found != gpu_adapters_.end()) {
    gpu_adapters_.splice(gpu_adapters_.end(), gpu_adapters_, found);  // most recently used
    return;
  }
  if (limits_.max_loras > 0 && gpu_adapters_.size() >= limits_.max_loras) {
    // The least recently used adapter no running request uses (one exists:
    // adapter_fits kept the batch's adapters within the slots).
    for (auto at = gpu_adapters_.begin(); at != gpu_adapters_.end(); ++at) {
      const bool in_use = std::any_of(running_.begin(), running_.end(),
                                      [&](const Request* running) { return running->lora_name == *at; });
      if (!in_use) {
        gpu_adapters_.erase(at);
        break;
      }
    }
  }
  gpu_adapters_.push_back(name);
  loading_adapters_ms_ += limits_.lora_load_ms;
  ++counters_.lora_loads;
}

namespace {

// The distinct adapters of `requests`, in order.
template <class Requests>
std::vector<std::string> distinct_adapters(const Requests& requests) {
  std::vector<std::string> names;
  for (const auto* request : requests) {
    if (!request->lora_name.empty() && std::find(names.begin(), names.end(), request->lora_name) == names.end()) {
      names.push_back(request->lora_name);
    }
  }
  return names;
}

}  // namespace

std::vector<std::string> Engine::running_adapters() const {
  return distinct_adapters(running_);
}

std::vector<std::string> Engine::waiting_adapters() const {
  return distinct_adapters(waiting_);
}

}  // namespace kvgate::sim
