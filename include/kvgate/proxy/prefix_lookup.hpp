#pragma once
// From a request's prompt to what the policy needs: its token count, its
// block hashes (kvgate's chained hash, partitioned like the engine's cache)
// and, per worker, the leading tokens the prefix index says it holds.
#include <cstdint>
#include <span>
#include <vector>

#include "kvgate/openai/request.hpp"
#include "kvgate/proxy/routing_table.hpp"

namespace kvgate::proxy {

struct PromptBlocks {
  std::uint32_t input_tokens = 0;  // 0: the prompt could not be tokenised
  std::vector<index::BlockHash> blocks;
  bool exact = false;                // the model's own tokenizer (and chat template) produced the tokens
  std::uint64_t segment_hits = 0;    // exact: sections whose ids came from the segment cache
  std::uint64_t segment_misses = 0;  // exact: sections encoded
};

// Models with a tokenizer folder are tokenised exactly as the engine will
// (chat template, then the tokenizer without added special tokens; text
// prompts with them, as vLLM's completions default); others approximately
// (tokenizer/approximate.hpp). A chat template that fails is the client's
// error (400 with the template's message). Uses a per-thread encoding
// workspace, so it may run on any thread.
Result<PromptBlocks, openai::ApiError> prompt_blocks(const ModelRoute& model, const openai::RequestSummary& request);

// Per worker of `model` (configuration order): cached tokens as the engine
// would count them. vLLM never serves the last prompt token from the cache,
// so at most floor((input_tokens - 1) / block_size) blocks count.
std::vector<std::uint32_t> predicted_cached_tokens(const ModelRoute& model, const PromptBlocks& prompt);

// The policy's view of a worker: gateway accounting, the engine's waiting
// queue from a scrape at most 5 s old, and the predicted cache hit.
policy::WorkerView worker_view(const workers::WorkerState& worker, std::uint32_t cached_tokens);

}  // namespace kvgate::proxy
