#pragma once
// Text where byte-pair encoding degrades (issue: hot path), generated
// deterministically from a seed: the tokenizer benchmark measures on it and
// the tokenizer tests check the backtracking encoder against the merge on
// it. Kinds:
//   long_words  unbroken lowercase words, the first 100 kB, then 1-21 kB;
//   letters     words of 49-3,049 letters from 2-, 3-, 9- and 26-letter
//               alphabets (runs of one pair; every bigram);
//   whitespace  runs of 1-2,000 spaces, tabs or newlines between letters;
//   base64      the 64 base64 characters, no breaks;
//   json        minified JSON objects;
//   cjk         CJK unified ideographs without spaces;
//   mixed       accented Latin, digits, punctuation and symbols, no spaces.
#include <cstdint>
#include <string>
#include <string_view>

namespace kvgate::bench {

// About `size` bytes (whole characters; a word may run past it). Seed 0 is
// the benchmark's text.
inline std::string adversarial_text(std::string_view kind, std::uint64_t seed = 0, std::size_t size = 400'000) {
  std::uint64_t state = 0x9e3779b97f4a7c15ULL ^ (seed * 0xbf58476d1ce4e5b9ULL);
  auto next = [&] {  // xorshift64
    state ^= state << 13;
    state ^= state >> 7;
    state ^= state << 17;
    return state;
  };
  std::string text;
  while (text.size() < size) {
    if (kind == "long_words") {
      const std::size_t length = text.empty() ? 100'000 : 1'000 + next() % 20'000;
      for (std::size_t index = 0; index < length; ++index) {
        text += static_cast<char>('a' + next() % 26);
      }
      text += ' ';
    } else if (kind == "letters") {
      static const std::string_view kAlphabets[] = {"ab", "abc", "abcdefghijklmnopqrstuvwxyz", "etaoinshr"};
      const std::string_view alphabet = kAlphabets[next() % 4];
      const std::size_t length = 49 + next() % 3'000;
      for (std::size_t index = 0; index < length; ++index) {
        text += alphabet[next() % alphabet.size()];
      }
      text += ' ';
    } else if (kind == "whitespace") {
      static const char kBlank[] = {' ', ' ', ' ', '\t', '\n'};
      text.append(1 + next() % 2'000, kBlank[next() % 5]);
      text += "x";
    } else if (kind == "base64") {
      static const char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
      text += kAlphabet[next() % 64];
    } else if (kind == "json") {
      text += R"({"id":)" + std::to_string(next() % 100000) + R"(,"name":"item)" + std::to_string(next() % 977) +
              R"(","tags":["a","b)" + std::to_string(next() % 13) + R"("],"price":)" + std::to_string(next() % 9999) +
              "." + std::to_string(next() % 100) + R"(,"ok":true},)";
    } else if (kind == "cjk") {
      const auto code = static_cast<std::uint32_t>(0x4E00 + next() % 0x5000);
      text += static_cast<char>(0xE0 | (code >> 12));
      text += static_cast<char>(0x80 | ((code >> 6) & 0x3F));
      text += static_cast<char>(0x80 | (code & 0x3F));
    } else {  // mixed
      static const std::string_view kPieces[] = {"é", "ß", "ñ", "0", "7", "-", "_", ".",
                                                 "=", "→", "€", "ü", "x", "Q", "—"};
      text += kPieces[next() % 15];
    }
  }
  return text;
}

}  // namespace kvgate::bench
