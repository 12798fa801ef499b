#pragma once
// The simulated engine: vLLM v1's continuous-batching scheduler over the
// paged prefix cache, one step at a time (vllm/v1/core/sched/scheduler.py,
// kv_cache_manager.py). Pure: the shell calls step(), sleeps for the step's
// modelled duration (divided by --time-scale) and delivers the tokens.
//
// Per step: running requests first, in admission order, each getting the
// tokens it still needs (the rest of its prompt, chunked, or one decode
// token) within the step's token budget; when blocks run out the most
// recently admitted running request is preempted (blocks freed, recomputed
// later). Then, if nothing was preempted, waiting requests are admitted
// FCFS while max_num_seqs, the budget and free blocks allow, each starting
// from its longest cached prefix, capped so the last prompt token is always
// computed. A request whose known tokens are all computed samples one token.
// With a CPU tier (BlockPool::enable_cpu_tier), the cached prefix continues
// with the blocks the tier holds (vLLM's connector lookup after the GPU
// one): they count as cached, take GPU blocks, and their copy back costs
// load_ms_per_offloaded_block each in the admitting step.
#include <cstdint>
#include <deque>
#include <list>
#include <memory>
#include <optional>
#include <unordered_map>
#include <vector>

#include "block_pool.hpp"
#include "slot_cache.hpp"

namespace kvgate::sim {

using RequestHandle = std::uint64_t;

struct EngineLimits {
  std::uint32_t max_num_seqs = 256;
  std::uint32_t max_num_batched_tokens = 8192;
  std::uint32_t cpu_offload_blocks = 0;  // the CPU tier's size (0: none)
  // llama.cpp's cache instead of vLLM's paged one (slot_cache.hpp): this
  // many slots, each running one request and keeping its last sequence;
  // no prefix blocks, no KV events, no preemption. 0: vLLM's.
  std::uint32_t slots = 0;
  double slot_similarity = 0.1;       // llama-server --slot-prompt-similarity
  std::uint64_t slot_ram_tokens = 0;  // its host-RAM prompt cache (--cache-ram), in tokens; 0: none
  // vLLM's --max-loras: adapters on the GPU at once (a batch mixes at most
  // this many; the least recently used one is unloaded for a new one), and
  // what loading one adds to the step that admits its request.
  std::uint32_t max_loras = 1;
  double lora_load_ms = 0;
  // A hybrid model's cache groups (vLLM's hybrid KV cache manager): the
  // first full attention, the others sliding windows of one size. Empty:
  // one full-attention group, events without group fields.
  std::vector<CacheGroup> groups;
};

// Modelled duration of one step, in milliseconds of GPU time.
struct StepCost {
  double overhead_ms = 0;                     // fixed per step (weights read, launch)
  double prefill_ms_per_token = 0;            // each prompt token computed
  double decode_ms_per_sequence = 0;          // each sequence decoding one token
  double attention_ms_per_context_token = 0;  // each token of context read by a scheduled sequence
  double load_ms_per_offloaded_block = 0;     // each block copied back from the CPU tier
};

struct NewRequest {
  std::vector<TokenId> prompt;
  std::uint32_t max_tokens = 1;
  BlockHash hash_seed = 0;  // partition seed (per-process seed, cache_salt)
  std::string cache_salt;   // reported in the root block's KV event
  std::string lora_name;    // the adapter the request named, reported in its KV events; empty: base model
  // Disaggregated decode: leading prompt tokens whose KV a prefill worker
  // computed and sent here (landed before add). At admission the full
  // blocks among them the cache lacks count as computed, take GPU blocks
  // and are cached like computed ones (vLLM's connector reports them as
  // external hits); at least the last prompt token is still computed.
  std::uint32_t external_tokens = 0;
};

struct Progress {
  RequestHandle request = 0;
  std::uint32_t new_output_tokens = 0;  // 0 or 1 per step
  bool first_token = false;             // this step produced the first output token
  bool finished = false;                // reached max_tokens; blocks already freed
  std::uint32_t cached_tokens = 0;      // prompt tokens served from the cache at first admission
};

struct StepReport {
  double duration_ms = 0;
  std::uint32_t prefill_tokens = 0;
  std::uint32_t decode_sequences = 0;
  std::uint64_t context_tokens = 0;
  std::uint32_t preemptions = 0;
  std::uint32_t loaded_blocks = 0;  // copied back from the CPU tier for admitted requests
  std::vector<Progress> progress;   // one entry per scheduled request
};

struct EngineCounters {
  std::uint64_t prefix_queries_tokens = 0;   // vllm:prefix_cache_queries_total
  std::uint64_t prefix_hit_tokens = 0;       // vllm:prefix_cache_hits_total
  std::uint64_t prompt_tokens = 0;           // vllm:prompt_tokens_total
  std::uint64_t generation_tokens = 0;       // vllm:generation_tokens_total
  std::uint64_t preemptions = 0;             // vllm:num_preemptions_total
  std::uint64_t offloaded_hit_tokens = 0;    // prompt tokens loaded from the CPU tier
  std::uint64_t lora_loads = 0;              // adapters loaded onto the GPU
  std::uint64_t external_hit_tokens = 0;     // prompt tokens received from a prefill worker
  std::uint64_t computed_prompt_tokens = 0;  // prompt tokens computed (recomputations after preemption too)
};

class Engine {
 public:
  Engine(std::uint32_t num_blocks, std::uint32_t block_size, EngineLimits limits, StepCost cost);

  RequestHandle add(NewRequest request);
  // Drops a request wherever it is; its blocks are freed (still cached).
  void abort(RequestHandle request);
  StepReport step();

  [[nodiscard]] bool idle() const { return running_.empty() && waiting_.empty(); }
  [[nodiscard]] std::size_t running() const { return running_.size(); }
  [[nodiscard]] std::size_t waiting() const { return waiting_.size(); }
  [[nodiscard]] const EngineCounters& counters() const { return counters_; }
  // Leading prompt tokens the GPU cache holds now for this prompt and seed
  // (what a transfer need not move).
  [[nodiscard]] std::uint32_t cached_prefix_tokens(std::span<const TokenId> prompt, BlockHash hash_seed) const;
  // The adapters with requests running and waiting (vllm:lora_requests_info).
  [[nodiscard]] std::vector<std::string> running_adapters() const;
  [[nodiscard]] std::vector<std::string> waiting_adapters() const;
  // llama.cpp mode only (EngineLimits::slots), else null.
  [[nodiscard]] const SlotCache* slots() const { return slots_ ? &*slots_ : nullptr; }
  // Forgets every cached prefix (the pool's, or the slots'); refused while
  // any is in use.
  bool reset_cache() { return slots_ ? slots_->clear() : pool_.reset(); }
  BlockPool& pool() { return pool_; }
  [[nodiscard]] const BlockPool& pool() const { return pool_; }

 private:
  struct Request {
    RequestHandle handle = 0;
    std::vector<TokenId> tokens;  // prompt, then generated tokens
    std::uint32_t prompt_length = 0;
    std::uint32_t max_tokens = 1;
    std::uint32_t output_tokens = 0;
    std::uint32_t computed = 0;       // tokens whose KV is in the cache
    std::vector<BlockId> blocks;      // in token order
    std::vector<BlockHash> hashes;    // of blocks[0..cached_blocks)
    std::uint32_t cached_blocks = 0;  // blocks registered in the prefix cache
    BlockHash hash_seed = 0;
    std::string cache_salt;
    std::string lora_name;
    std::uint32_t external_tokens = 0;
    std::optional<std::uint32_t> cached_tokens;  // set at first admission
    std::optional<std::uint32_t> slot;           // llama.cpp mode: the slot it runs in
    // A hybrid model: each sliding-window group's blocks by position
    // (kNullBlock: never needed, or freed once out of the window) and how
    // many leading positions it has cached.
    std::vector<std::vector<BlockId>> local_blocks;
    std::vector<std::uint32_t> local_cached;
  };
  static constexpr BlockId kNullBlock = UINT32_MAX;
  struct Scheduled {
    Request* request;
    std::uint32_t tokens;
  };

  bool grow_blocks(Request& request, std::uint32_t total_tokens);
  void preempt(Request& request);
  void schedule_running(std::uint32_t& budget, std::vector<Scheduled>& scheduled, StepReport& report);
  void admit_waiting(std::uint32_t& budget, std::vector<Scheduled>& scheduled);
  bool try_admit(Request& request, std::uint32_t budget, std::uint32_t& tokens);
  bool try_admit_to_slot(Request& request, std::uint32_t budget, std::uint32_t& tokens);
  bool try_admit_hybrid(Request& request, std::uint32_t budget, std::uint32_t& tokens);
  [[nodiscard]] bool hybrid() const { return limits_.groups.size() > 1; }
  // The sliding-window groups' hit within the full group's `full_blocks`
  // leading blocks (vLLM's SlidingWindowManager.find_longest_cache_hit).
  [[nodiscard]] std::uint32_t sliding_hit(std::span<const BlockHash> hashes, std::uint32_t full_blocks) const;
  // Frees the sliding-window blocks the request's window has passed
  // (vLLM's remove_skipped_blocks, before each allocation).
  void free_skipped(Request& request);
  void cache_full_blocks(Request& request);
  void finish(Request& request);
  void release_blocks(Request& request);
  [[nodiscard]] std::vector<BlockHash> prompt_hashes(const Request& request) const;
  Progress advance(Request& request, std::uint32_t tokens);

  BlockPool pool_;
  EngineLimits limits_;
  StepCost cost_;
  RequestHandle next_handle_ = 1;
  std::unordered_map<RequestHandle, std::unique_ptr<Request>> requests_;
  std::vector<Request*> running_;  // admission order
  std::deque<Request*> waiting_;   // FCFS; preempted requests go to the front
  EngineCounters counters_;
  std::uint32_t loading_blocks_ = 0;     // this step's loads from the CPU tier
  double loading_adapters_ms_ = 0;       // this step's adapter loads
  std::list<std::string> gpu_adapters_;  // loaded adapters, least recently used first
  // A request's adapter may join the batch (it is loaded, or a slot can be
  // freed); loads it (the step pays) when it is not on the GPU.
  bool adapter_fits(const Request& request) const;
  void load_adapter(const std::string& name);
  std::optional<SlotCache> slots_;  // llama.cpp mode
  std::uint64_t steps_ = 0;         // the slots' clock
};

// Generated tokens are deterministic filler: the i-th output token of any
// request has this id.
TokenId filler_token(std::uint32_t output_index);

}  // namespace kvgate::sim
