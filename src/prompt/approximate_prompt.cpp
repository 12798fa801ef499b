#include "kvgate/prompt/approximate_prompt.hpp"

#include "kvgate/tokenizer/approximate.hpp"

namespace kvgate::prompt {

std::string render_approximate_chat(const std::vector<openai::ChatMessage>& messages, bool add_generation_prompt) {
  std::string rendered;
  for (const auto& message : messages) {
    rendered += "<|";
    rendered += message.role;
    rendered += "|>\n";
    rendered += message.text;
    rendered += '\n';
  }
  if (add_generation_prompt) {
    rendered += "<|assistant|>\n";
  }
  return rendered;
}

std::vector<TokenId> approximate_prompt_tokens(const openai::PromptInput& prompt) {
  if (const auto* chat = std::get_if<openai::ChatPrompt>(&prompt)) {
    return tokenizer::approximate_tokens(render_approximate_chat(chat->messages, chat->add_generation_prompt));
  }
  if (const auto* text = std::get_if<std::string>(&prompt)) {
    return tokenizer::approximate_tokens(*text);
  }
  if (const auto* ids = std::get_if<std::vector<TokenId>>(&prompt)) {
    return *ids;
  }
  return {};
}

}  // namespace kvgate::prompt
