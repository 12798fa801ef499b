// A literal pattern (normalizers' and pre-tokenizers' {"String": ...}) is
// found by byte search, not by PCRE2; it must find what PCRE2 finds.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "regex.hpp"

namespace kvgate::tokenizer {
namespace {

// The same text as a pattern PCRE2 matches: metacharacters escaped.
Regex matched_by_pcre2(std::string_view text) {
  std::string escaped;
  for (char symbol : text) {
    if (std::string_view("\\^$.|?*+()[]{}").find(symbol) != std::string_view::npos) {
      escaped += '\\';
    }
    escaped += symbol;
  }
  auto compiled = Regex::compile(escaped);
  EXPECT_TRUE(compiled.has_value()) << escaped;
  return std::move(compiled.value());
}

TEST(Regex, ALiteralFindsEveryMatchPcre2FindsFromEveryStart) {
  // Pieces sharing bytes: U+2581 and U+2582 share their first two bytes,
  // "é" and "è" their first; metacharacters stand for themselves.
  const std::vector<std::string> pieces = {"a",        "b", " ", "\u2581", "\u2582", "\xc3\xa9",
                                           "\xc3\xa8", ".", "*", "(",      "\n"};
  std::mt19937 random(3);
  auto draw = [&](std::size_t count) {
    std::string text;
    for (std::size_t index = 0; index < count; ++index) {
      text += pieces[random() % pieces.size()];
    }
    return text;
  };
  MatchScratch scratch;
  int found = 0;
  for (int round = 0; round < 300; ++round) {
    const std::string needle = draw(random() % 3);  // the empty literal too
    const std::string text = draw(random() % 40);
    const Regex literal = Regex::literal(needle);
    const Regex reference = matched_by_pcre2(needle);
    // Every character boundary, and one past the end.
    for (std::size_t start = 0; start <= text.size() + 1; ++start) {
      if (start < text.size() && (static_cast<unsigned char>(text[start]) & 0xC0) == 0x80) {
        continue;
      }
      const MatchSpan expected = reference.find(text, start, scratch);
      const MatchSpan got = literal.find(text, start, scratch);
      ASSERT_EQ(got.end, expected.end) << "needle '" << needle << "' text '" << text << "' from " << start;
      if (expected.end != std::string_view::npos) {
        ASSERT_EQ(got.begin, expected.begin) << "needle '" << needle << "' text '" << text << "' from " << start;
        ++found;
      }
    }
  }
  EXPECT_GT(found, 1000);
}

// Patterns that match the empty string match it at the end, and nowhere
// past it: the JIT's fast entry does not check the start itself.
TEST(Regex, APatternMatchesAtTheEndButFindsNothingPastIt) {
  MatchScratch scratch;
  for (const char* pattern : {"\\s*", "a?", "(?=x)?", "\\p{L}*"}) {
    auto regex = Regex::compile(pattern);
    ASSERT_TRUE(regex.has_value()) << pattern;
    for (std::string_view text : {"", "ab c", "\u2581\u2581"}) {
      const MatchSpan at_end = regex->find(text, text.size(), scratch);
      EXPECT_EQ(at_end.begin, text.size()) << pattern << " in '" << text << "'";
      EXPECT_EQ(at_end.end, text.size()) << pattern << " in '" << text << "'";
      EXPECT_EQ(regex->find(text, text.size() + 1, scratch).end, std::string_view::npos)
          << pattern << " in '" << text << "'";
    }
  }
}

}  // namespace
}  // namespace kvgate::tokenizer
