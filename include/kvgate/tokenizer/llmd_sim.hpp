#pragma once
// llm-d-inference-sim's simulated tokenizer (its "dummy" tokenizer: the
// mode it runs in with --force-dummy-tokenizer, or for a model name Hugging
// Face does not know), so that kvgate's token ids, and so its block hashes,
// are the ones that engine's KV events and cached-token counts are made of.
//
// Source: llm-d-inference-sim v0.10.2, pkg/tokenizer/tokenizer.go. A token
// is a match of Go's regexp
//   ({|}|:|,|-|\.|\?|!|;|@|#|\$|%|\^|&|\*|\(|\)|\+|_|~|/|\\|>|<|\[|\]|=|"|'|\w+)(\s*)
// found leftmost-first, left to right (Regexp.FindAllString): one of those
// punctuation bytes, or a run of ASCII word characters [0-9A-Za-z_], each
// with the ASCII spaces after it ([\t\n\f\r ], RE2's \s). Bytes no match
// starts at (any other byte, every non-ASCII one) belong to no token. A
// token's id is the 32-bit FNV-1a hash of its bytes. Leftmost-first: a "_"
// that starts a match is a token of its own ("_" comes before \w+ in the
// alternation); inside a word it is part of the word.
#include <string_view>
#include <vector>

#include "kvgate/core/token.hpp"

namespace kvgate::tokenizer {

std::vector<TokenId> llmd_sim_tokens(std::string_view text);

}  // namespace kvgate::tokenizer
