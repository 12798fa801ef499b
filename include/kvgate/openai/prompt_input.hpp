#pragma once
// What a request asks the engine to read, before tokenisation: a chat (the
// engine applies its chat template), a text prompt, or token ids.
#include <string>
#include <variant>
#include <vector>

#include "kvgate/core/token.hpp"

namespace kvgate::openai {

struct ChatMessage {
  std::string role;
  std::string text;  // string content, or the text parts of list content joined by "\n"
};

struct ChatPrompt {
  std::vector<ChatMessage> messages;
  bool add_generation_prompt = true;
};

// monostate: nothing kvgate can tokenise (e.g. a batch of prompts); such a
// request is routed without prefix information.
using PromptInput = std::variant<std::monostate, ChatPrompt, std::string, std::vector<TokenId>>;

}  // namespace kvgate::openai
