#pragma once
// A request's prompt tokens for a model without a tokenizer folder: the
// approximate tokenisation (tokenizer/approximate.hpp) of the request's
// prompt, chats rendered as below. Shared with kvgate-sim, so gateway and
// simulator agree.
//
// Chat rendering: each message becomes "<|ROLE|>\n" + its text + "\n"; with
// add_generation_prompt, "<|assistant|>\n" follows. Text content is the
// string, or the "text" parts of a list joined by "\n".
#include <string>
#include <vector>

#include "kvgate/core/token.hpp"
#include "kvgate/openai/prompt_input.hpp"

namespace kvgate::prompt {

std::string render_approximate_chat(const std::vector<openai::ChatMessage>& messages, bool add_generation_prompt);

// Chats rendered as above, text cut into pieces, token ids as given;
// monostate gives no tokens.
std::vector<TokenId> approximate_prompt_tokens(const openai::PromptInput& prompt);

}  // namespace kvgate::prompt
