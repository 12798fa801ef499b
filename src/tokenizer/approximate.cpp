#include "kvgate/tokenizer/approximate.hpp"

#include <xxhash.h>

namespace kvgate::tokenizer {

std::string render_approximate_chat(const std::vector<ApproximateMessage>& messages, bool add_generation_prompt) {
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

std::vector<prefix::TokenId> approximate_tokens(std::string_view text) {
  std::vector<prefix::TokenId> tokens;
  tokens.reserve((text.size() + kApproximateBytesPerToken - 1) / kApproximateBytesPerToken);
  for (std::size_t offset = 0; offset < text.size(); offset += kApproximateBytesPerToken) {
    auto piece = text.substr(offset, kApproximateBytesPerToken);
    tokens.push_back(static_cast<prefix::TokenId>(1000 + XXH3_64bits(piece.data(), piece.size()) % 100000));
  }
  return tokens;
}

std::vector<prefix::TokenId> approximate_prompt_tokens(const PromptInput& prompt) {
  if (const auto* chat = std::get_if<ChatPrompt>(&prompt)) {
    return approximate_tokens(render_approximate_chat(chat->messages, chat->add_generation_prompt));
  }
  if (const auto* text = std::get_if<std::string>(&prompt)) {
    return approximate_tokens(*text);
  }
  if (const auto* ids = std::get_if<std::vector<prefix::TokenId>>(&prompt)) {
    return *ids;
  }
  return {};
}

}  // namespace kvgate::tokenizer
