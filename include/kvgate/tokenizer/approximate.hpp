#pragma once
// Approximate tokenisation, for models without a configured tokenizer: a
// documented, deterministic stand-in that kvgate-sim uses too, so gateway
// and simulator agree on token ids without a real vocabulary.
//
// Tokens: the UTF-8 bytes cut into 4-byte pieces from the start (the last
// piece may be shorter); piece i becomes
//   id = 1000 + XXH3_64(piece, seed 0) % 100000.
// Appending text to a prompt changes at most its last token, so prefixes of
// a conversation keep their token ids and therefore their block hashes.
// (How a chat is rendered before this: prompt/approximate_prompt.hpp.)
#include <cstdint>
#include <string_view>
#include <vector>

#include "kvgate/core/token.hpp"

namespace kvgate::tokenizer {

inline constexpr std::size_t kApproximateBytesPerToken = 4;

std::vector<TokenId> approximate_tokens(std::string_view text);

}  // namespace kvgate::tokenizer
