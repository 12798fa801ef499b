#pragma once
// From a request to what routing needs of its prompt: its token count and
// its block hashes (kvgate's chained hash, partitioned like the engine's
// cache by model and cache_salt). The one place where request -> tokens ->
// blocks is assembled, for the data plane and /debug/route alike.
#include <cstdint>
#include <ctime>
#include <optional>
#include <string_view>
#include <vector>

#include "kvgate/core/result.hpp"
#include "kvgate/openai/errors.hpp"
#include "kvgate/openai/request.hpp"
#include "kvgate/prefix/block_hash.hpp"
#include "kvgate/prompt/model_tokenizer.hpp"
#include "kvgate/prompt/stand_in_tokenizer.hpp"

namespace kvgate::prompt {

struct PreparedPrompt {
  std::uint32_t input_tokens = 0;  // 0: the prompt could not be tokenised
  std::vector<prefix::BlockHash> blocks;
  bool exact = false;                      // the model's own tokenizer (and chat template) produced the tokens
  std::uint64_t segment_hits = 0;          // exact: sections whose ids came from the segment cache
  std::uint64_t segment_misses = 0;        // exact: sections encoded
  std::uint64_t iterations_replayed = 0;   // exact: chat-template loop iterations the render cache replayed
  std::uint64_t iterations_evaluated = 0;  // exact: iterations evaluated
  // The LoRA adapter the blocks are partitioned by: its position in the
  // model's adapters (nullopt: the base model).
  std::optional<std::size_t> adapter;
};

// How a model's prompts are tokenised and cut into blocks.
struct PromptModel {
  std::string_view name;     // seeds the block hashes (partition)
  std::string_view adapter;  // the LoRA adapter the request names (its own partition); empty: the base model
  std::optional<std::size_t> adapter_index;  // its position in the model's adapters
  std::uint32_t block_size = 16;
  const ModelTokenizer* tokenizer = nullptr;  // null: the stand-in below
  StandInTokenizer stand_in = StandInTokenizer::kvgate;
};

// Models with a tokenizer folder are tokenised exactly as the engine will
// (chat template, then the tokenizer without added special tokens; text
// prompts with them, as vLLM's completions default); others with their
// engines' stand-in (kvgate's approximation, tokenizer/approximate.hpp, or
// llm-d-inference-sim's, llmd_sim_prompt.hpp). A chat template that fails is the client's
// error (400 with the template's message, code chat_template_error).
// `local_now` is the clock the template's strftime_now reads. Renders with a
// per-thread render cache (earlier turns' messages are replayed, not
// evaluated again) and encodes with a per-thread workspace (its segment cache
// remembers recent sections), so it may run on any thread.
Result<PreparedPrompt, openai::ApiError> prepare_prompt(const PromptModel& model, const openai::RequestSummary& request,
                                                        const std::tm& local_now);

}  // namespace kvgate::prompt
