#include "kvgate/prompt/exact_tokens.hpp"

namespace kvgate::prompt {

Result<std::vector<kvgate::TokenId>, PromptError> exact_prompt_tokens(const ModelTokenizer& model,
                                                                      const openai::RequestSummary& request,
                                                                      tokenizer::EncodeWorkspace& workspace,
                                                                      const ExactOptions& options) {
  std::vector<kvgate::TokenId> ids;
  if (request.chat_body) {
    if (!model.chat_template) {
      return ids;
    }
    const auto& chat_template = *model.chat_template;
    auto input = render_input_from_request(*request.chat_body, chat_template, model.special_tokens, request.chat_body);
    if (!input) {
      return unexpected(PromptError{input.error(), "messages", false});
    }
    input->now = options.now;
    input->output_limit = options.max_prompt_bytes;
    input->step_limit = options.max_template_steps;
    input->cache = options.render_cache;
    auto prompt = chat_template.render(*input);
    if (!prompt) {
      return unexpected(PromptError{prompt.error(), "messages", true});
    }
    // Rendered from strings the JSON parser accepted (valid UTF-8) and the
    // template's own literals, so the prompt needs no second check.
    auto encoded = model.tokenizer.encode(*prompt, false, workspace, ids, true);
    if (!encoded) {
      return unexpected(PromptError{encoded.error(), "messages", false});
    }
  } else if (const auto* text = std::get_if<std::string>(&request.prompt)) {
    auto encoded = model.tokenizer.encode(*text, true, workspace, ids);
    if (!encoded) {
      return unexpected(PromptError{encoded.error(), "prompt", false});
    }
  } else if (const auto* given = std::get_if<std::vector<kvgate::TokenId>>(&request.prompt)) {
    ids = *given;
  }
  return ids;
}

}  // namespace kvgate::prompt
