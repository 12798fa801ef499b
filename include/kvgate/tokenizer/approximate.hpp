#pragma once
// Approximate tokenisation, for models without a configured tokenizer: a
// documented, deterministic stand-in that kvgate-sim uses too, so gateway
// and simulator agree on token ids without a real vocabulary.
//
// Chat rendering: each message becomes "<|ROLE|>\n" + its text + "\n"; with
// add_generation_prompt, "<|assistant|>\n" follows. Text content is the
// string, or the "text" parts of a list joined by "\n".
// Tokens: the rendered UTF-8 bytes cut into 4-byte pieces from the start
// (the last piece may be shorter); piece i becomes
//   id = 1000 + XXH3_64(piece, seed 0) % 100000.
// Appending text to a prompt changes at most its last token, so prefixes of
// a conversation keep their token ids and therefore their block hashes.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "kvgate/prefix/block_hash.hpp"
#include "kvgate/tokenizer/prompt.hpp"

namespace kvgate::tokenizer {

using ApproximateMessage = ChatMessage;

inline constexpr std::size_t kApproximateBytesPerToken = 4;

std::string render_approximate_chat(const std::vector<ApproximateMessage>& messages, bool add_generation_prompt);
std::vector<prefix::TokenId> approximate_tokens(std::string_view text);
// A whole prompt: chats rendered as above, text cut into pieces, token ids
// as given; monostate gives no tokens.
std::vector<prefix::TokenId> approximate_prompt_tokens(const PromptInput& prompt);

}  // namespace kvgate::tokenizer
