#include "kvgate/tokenizer/approximate.hpp"

#include <xxhash.h>

namespace kvgate::tokenizer {

std::vector<TokenId> approximate_tokens(std::string_view text) {
  std::vector<TokenId> tokens;
  tokens.reserve((text.size() + kApproximateBytesPerToken - 1) / kApproximateBytesPerToken);
  for (std::size_t offset = 0; offset < text.size(); offset += kApproximateBytesPerToken) {
    auto piece = text.substr(offset, kApproximateBytesPerToken);
    tokens.push_back(static_cast<TokenId>(1000 + XXH3_64bits(piece.data(), piece.size()) % 100000));
  }
  return tokens;
}

}  // namespace kvgate::tokenizer
