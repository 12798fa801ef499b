#pragma once
// The pre-tokenizers' regular expressions. tokenizer.json patterns are
// written for Oniguruma (what Hugging Face tokenizers compiles them with);
// kvgate runs them on PCRE2 with its JIT after rewriting the constructs whose
// meaning differs, the same way the reference JavaScript tokenizer does:
//   \s, \S     -> Unicode White_Space exactly (PCRE2's \s differs)
//   (?i:...)   -> ASCII-only case folding, letters spelled as [xX]
// Unicode properties (\p{L}, \p{N}, ...) come from PCRE2's tables (Unicode
// 14 in Debian 12's PCRE2 10.42); characters assigned later are not letters
// to it. See README.md for why PCRE2.
#include <cstddef>
#include <memory>
#include <string>
#include <string_view>

#include "kvgate/core/result.hpp"

struct pcre2_real_code_8;
struct pcre2_real_match_data_8;

namespace kvgate::tokenizer {

// Per-thread match state (PCRE2 match data); one per encoding workspace.
class MatchScratch {
 public:
  MatchScratch();
  ~MatchScratch();
  MatchScratch(const MatchScratch&) = delete;
  MatchScratch& operator=(const MatchScratch&) = delete;
  [[nodiscard]] pcre2_real_match_data_8* data() const { return data_; }

 private:
  pcre2_real_match_data_8* data_;
};

struct MatchSpan {
  std::size_t begin = 0;
  std::size_t end = 0;
};

class Regex {
 public:
  // Errors carry PCRE2's message and the offset in the rewritten pattern.
  static Result<Regex, std::string> compile(std::string_view oniguruma_pattern);
  static Regex literal(std::string_view text);  // a fixed string, found by byte search

  // First match at or after `start` in valid UTF-8 `text`; end == npos when
  // there is none.
  MatchSpan find(std::string_view text, std::size_t start, MatchScratch& scratch) const;

 private:
  explicit Regex(std::shared_ptr<pcre2_real_code_8> code) : code_(std::move(code)) {}
  std::shared_ptr<pcre2_real_code_8> code_;  // immutable once compiled; shared by copies; none for a literal
  std::string literal_;                      // a `literal` regex's text, found without PCRE2
  bool is_literal_ = false;
  bool jit_ = false;  // JIT-compiled: matched through pcre2_jit_match
};

// Exposed for tests: the Oniguruma -> PCRE2 rewrite described above.
std::string rewrite_oniguruma_pattern(std::string_view pattern);

}  // namespace kvgate::tokenizer
