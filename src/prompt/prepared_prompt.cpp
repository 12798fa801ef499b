#include "kvgate/prompt/prepared_prompt.hpp"

#include "kvgate/openai/prompt.hpp"
#include "kvgate/prompt/approximate_prompt.hpp"
#include "kvgate/prompt/exact_tokens.hpp"
#include "kvgate/prompt/llmd_sim_prompt.hpp"

namespace kvgate::prompt {

namespace {
// Per I/O thread: about 30 conversations of 128k tokens (a record holds a
// message and its rendered text).
constexpr std::size_t kRenderCacheBytes = 64u << 20;
}  // namespace

Result<PreparedPrompt, openai::ApiError> prepare_prompt(const PromptModel& model, const openai::RequestSummary& request,
                                                        const std::tm& local_now) {
  PreparedPrompt result;
  result.adapter = model.adapter_index;
  std::vector<kvgate::TokenId> tokens;
  if (model.tokenizer != nullptr) {
    // Each thread encodes with its own workspace; the segment cache in it
    // remembers the sections of recent prompts.
    thread_local tokenizer::EncodeWorkspace workspace;
    thread_local chat_template::RenderCache render_cache(kRenderCacheBytes);
    auto hits = workspace.segment_cache_hits();
    auto misses = workspace.segment_cache_misses();
    auto replayed = render_cache.replayed_iterations();
    auto evaluated = render_cache.evaluated_iterations();
    ExactOptions options;
    options.now = local_now;
    options.render_cache = &render_cache;
    auto exact = exact_prompt_tokens(*model.tokenizer, request, workspace, options);
    if (!exact) {
      const auto& problem = exact.error();
      return unexpected(openai::invalid_request(problem.message, problem.param,
                                                problem.template_failed ? "chat_template_error" : "invalid_value"));
    }
    tokens = std::move(*exact);
    result.exact = true;
    result.segment_hits = workspace.segment_cache_hits() - hits;
    result.segment_misses = workspace.segment_cache_misses() - misses;
    result.iterations_replayed = render_cache.replayed_iterations() - replayed;
    result.iterations_evaluated = render_cache.evaluated_iterations() - evaluated;
  } else if (model.stand_in == StandInTokenizer::llm_d_inference_sim) {
    tokens = llmd_sim_prompt_tokens(request);
  } else {
    tokens = approximate_prompt_tokens(
        request.chat_body ? openai::extract_prompt(*request.chat_body, openai::Endpoint::chat_completions)
                          : request.prompt);
  }
  if (tokens.empty() || tokens.size() > UINT32_MAX) {
    return result;
  }
  result.input_tokens = static_cast<std::uint32_t>(tokens.size());
  auto seed = prefix::partition_seed({model.name, model.adapter, request.cache_salt.value_or("")});
  result.blocks = prefix::hash_blocks(tokens, model.block_size, seed);
  return result;
}

}  // namespace kvgate::prompt
