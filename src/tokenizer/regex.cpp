#include "regex.hpp"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <cctype>

namespace kvgate::tokenizer {

namespace {

// Unicode's White_Space property, as class contents.
constexpr std::string_view kWhiteSpaceRanges =
    "\\t-\\r \\x{85}\\x{a0}\\x{1680}\\x{2000}-\\x{200a}\\x{2028}\\x{2029}\\x{202f}\\x{205f}\\x{3000}";

void append_folded_letter(std::string& out, char letter, bool in_class) {
  char lower = static_cast<char>(std::tolower(static_cast<unsigned char>(letter)));
  char upper = static_cast<char>(std::toupper(static_cast<unsigned char>(letter)));
  if (in_class) {
    out += lower;
    out += upper;
  } else {
    out += '[';
    out += lower;
    out += upper;
    out += ']';
  }
}

}  // namespace

std::string rewrite_oniguruma_pattern(std::string_view pattern) {
  std::string out;
  out.reserve(pattern.size() * 2);
  bool in_class = false;
  int depth = 0;
  int fold_depth = -1;  // group depth of an open (?i:...), -1 when none
  for (std::size_t index = 0; index < pattern.size(); ++index) {
    char symbol = pattern[index];
    if (symbol == '\\' && index + 1 < pattern.size()) {
      char escaped = pattern[++index];
      if (escaped == 's') {
        out += in_class ? std::string(kWhiteSpaceRanges) : "[" + std::string(kWhiteSpaceRanges) + "]";
      } else if (escaped == 'S' && !in_class) {
        out += "[^" + std::string(kWhiteSpaceRanges) + "]";
      } else {
        out += '\\';
        out += escaped;
      }
      continue;
    }
    if (in_class) {
      if (symbol == ']') {
        in_class = false;
      }
      if (fold_depth >= 0 && std::isalpha(static_cast<unsigned char>(symbol)) &&
          !(index + 1 < pattern.size() && pattern[index + 1] == '-') && !(index > 0 && pattern[index - 1] == '-')) {
        append_folded_letter(out, symbol, true);
      } else {
        out += symbol;
      }
      continue;
    }
    if (symbol == '[') {
      in_class = true;
      out += symbol;
      // A ']' or '^]' right after '[' is literal.
      if (index + 1 < pattern.size() && pattern[index + 1] == '^') {
        out += pattern[++index];
      }
      if (index + 1 < pattern.size() && pattern[index + 1] == ']') {
        out += pattern[++index];
      }
      continue;
    }
    if (symbol == '(') {
      ++depth;
      if (pattern.substr(index, 4) == "(?i:") {
        if (fold_depth < 0) {
          fold_depth = depth;
        }
        out += "(?:";
        index += 3;
        continue;
      }
    } else if (symbol == ')') {
      if (depth == fold_depth) {
        fold_depth = -1;
      }
      --depth;
    } else if (fold_depth >= 0 && std::isalpha(static_cast<unsigned char>(symbol))) {
      append_folded_letter(out, symbol, false);
      continue;
    }
    out += symbol;
  }
  return out;
}

MatchScratch::MatchScratch() : data_(pcre2_match_data_create(1, nullptr)) {}
MatchScratch::~MatchScratch() {
  pcre2_match_data_free(data_);
}

Result<Regex, std::string> Regex::compile(std::string_view oniguruma_pattern) {
  std::string rewritten = rewrite_oniguruma_pattern(oniguruma_pattern);
  int error_code = 0;
  PCRE2_SIZE error_offset = 0;
  pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(rewritten.data()), rewritten.size(),
                                   PCRE2_UTF | PCRE2_UCP | PCRE2_NO_UTF_CHECK, &error_code, &error_offset, nullptr);
  if (code == nullptr) {
    PCRE2_UCHAR message[256];
    pcre2_get_error_message(error_code, message, sizeof message);
    return unexpected("regex " + std::string(oniguruma_pattern) + ": " + reinterpret_cast<char*>(message) +
                      " at offset " + std::to_string(error_offset));
  }
  // Without the JIT (e.g. under some sanitizers) matching still works, slower.
  const bool jit = pcre2_jit_compile(code, PCRE2_JIT_COMPLETE) == 0;
  Regex regex(std::shared_ptr<pcre2_code>(code, pcre2_code_free));
  regex.jit_ = jit;
  return regex;
}

Regex Regex::literal(std::string_view text) {
  // Matched by plain search (see find), never by PCRE2. Literals come from
  // the tokenizer file's JSON strings, which the parser has checked as UTF-8.
  Regex regex(nullptr);
  regex.literal_ = std::string(text);
  regex.is_literal_ = true;
  return regex;
}

MatchSpan Regex::find(std::string_view text, std::size_t start, MatchScratch& scratch) const {
  if (is_literal_) {
    // A valid UTF-8 string found in valid UTF-8 text starts on a character
    // boundary, so byte search finds what PCRE2 finds. PCRE2 was a tenth
    // of Gemma 3's encoding, replacing and splitting at spaces.
    const std::size_t begin = text.find(literal_, start);  // npos when start is past the end
    if (begin == std::string_view::npos) {
      return {text.size(), std::string_view::npos};
    }
    return {begin, begin + literal_.size()};
  }
  // The JIT's own entry skips pcre2_match's checks of its arguments (its
  // "fast path", pcre2_jit_match(3)), which were a quarter of the time
  // spent matching the pre-tokenizers' patterns over short words. It does
  // not check the text as UTF-8 either, which pcre2_match was told not to,
  // nor the start, which pcre2_match rejected past the end.
  if (start > text.size()) {
    return {text.size(), std::string_view::npos};
  }
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  const int result =
      jit_ ? pcre2_jit_match(code_.get(), subject, text.size(), start, 0, scratch.data(), nullptr)
           : pcre2_match(code_.get(), subject, text.size(), start, PCRE2_NO_UTF_CHECK, scratch.data(), nullptr);
  if (result < 0) {
    return {text.size(), std::string_view::npos};
  }
  const PCRE2_SIZE* vector = pcre2_get_ovector_pointer(scratch.data());
  return {vector[0], vector[1]};
}

}  // namespace kvgate::tokenizer
