#pragma once
// A request's prompt tokens exactly as the engine computes them, shared by
// the gateway and kvgate-sim: chat requests are prepared like vLLM, rendered
// with the model's chat template and encoded without added special tokens;
// text prompts are encoded with them (vLLM's completions default); token-id
// prompts are taken as given. Pure apart from the caller's workspace.
#include <ctime>
#include <string>
#include <vector>

#include "kvgate/core/result.hpp"
#include "kvgate/openai/request.hpp"
#include "kvgate/prompt/model_tokenizer.hpp"

namespace kvgate::prompt {

struct PromptError {
  std::string message;
  std::string param;             // the request field at fault
  bool template_failed = false;  // the chat template raised or failed
};

struct ExactOptions {
  std::tm now{};                             // the clock strftime_now reads
  std::size_t max_prompt_bytes = 64u << 20;  // a rendered prompt may not grow past this
  // Real templates take thousands of steps per message; this bounds a
  // hostile one to well under a second.
  std::uint64_t max_template_steps = 20'000'000;
  // Earlier renders' loop iterations (chat_template.hpp); null renders all.
  chat_template::RenderCache* render_cache = nullptr;
};

// Empty ids when the request has nothing to tokenise exactly (batched
// prompts, or a chat for a model without a chat template).
Result<std::vector<kvgate::TokenId>, PromptError> exact_prompt_tokens(const ModelTokenizer& model,
                                                                      const openai::RequestSummary& request,
                                                                      tokenizer::EncodeWorkspace& workspace,
                                                                      const ExactOptions& options);

}  // namespace kvgate::prompt
