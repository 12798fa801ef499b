#include "kvgate/tokenizer/llmd_sim.hpp"

#include <array>
#include <cstdint>

namespace kvgate::tokenizer {
namespace {

enum class ByteClass : std::uint8_t { none, punctuation, word, space };

constexpr std::array<ByteClass, 256> classes() {
  std::array<ByteClass, 256> table{};
  for (char c : std::string_view("{}:,-.?!;@#$%^&*()+_~/\\><[]=\"'")) {
    table[static_cast<unsigned char>(c)] = ByteClass::punctuation;
  }
  for (int c = '0'; c <= '9'; ++c) {
    table[c] = ByteClass::word;
  }
  for (int c = 'A'; c <= 'Z'; ++c) {
    table[c] = ByteClass::word;
  }
  for (int c = 'a'; c <= 'z'; ++c) {
    table[c] = ByteClass::word;
  }
  for (char c : std::string_view("\t\n\f\r ")) {
    table[static_cast<unsigned char>(c)] = ByteClass::space;
  }
  return table;
}

constexpr auto kClasses = classes();

ByteClass class_of(char byte) {
  return kClasses[static_cast<unsigned char>(byte)];
}

std::uint32_t fnv1a32(std::string_view bytes) {
  std::uint32_t hash = 2166136261u;
  for (char byte : bytes) {
    hash ^= static_cast<unsigned char>(byte);
    hash *= 16777619u;
  }
  return hash;
}

}  // namespace

std::vector<TokenId> llmd_sim_tokens(std::string_view text) {
  std::vector<TokenId> ids;
  std::size_t at = 0;
  while (at < text.size()) {
    const auto start = at;
    const auto kind = class_of(text[at]);
    if (kind == ByteClass::punctuation) {
      // "_" is both a punctuation alternative and a word character: the
      // alternation tries the single byte first, so a match starting at "_"
      // is "_" alone.
      ++at;
    } else if (kind == ByteClass::word) {
      while (at < text.size() && (class_of(text[at]) == ByteClass::word || text[at] == '_')) {
        ++at;
      }
    } else {
      ++at;  // no match starts here
      continue;
    }
    while (at < text.size() && class_of(text[at]) == ByteClass::space) {
      ++at;
    }
    ids.push_back(fnv1a32(text.substr(start, at - start)));
  }
  return ids;
}

}  // namespace kvgate::tokenizer
