#include "lexer.hpp"

#include <array>
#include <utility>

namespace kvgate::chat_template {

namespace {

bool is_word(char symbol) {
  auto byte = static_cast<unsigned char>(symbol);
  return std::isalnum(byte) || symbol == '_';
}
bool is_digit(char symbol) {
  return symbol >= '0' && symbol <= '9';
}
// The reference tests /\s/ on UTF-16 units; inside tags only ASCII matters.
bool is_space(char symbol) {
  return symbol == ' ' || (symbol >= '\t' && symbol <= '\r');
}

constexpr std::array<std::pair<std::string_view, TokenType>, 29> kSymbols{{
    {"{%", TokenType::kOpenStatement},  {"%}", TokenType::kCloseStatement},
    {"{{", TokenType::kOpenExpression}, {"}}", TokenType::kCloseExpression},
    {"(", TokenType::kOpenParen},       {")", TokenType::kCloseParen},
    {"{", TokenType::kOpenBrace},       {"}", TokenType::kCloseBrace},
    {"[", TokenType::kOpenBracket},     {"]", TokenType::kCloseBracket},
    {",", TokenType::kComma},           {".", TokenType::kDot},
    {":", TokenType::kColon},           {"|", TokenType::kPipe},
    {"<=", TokenType::kComparison},     {">=", TokenType::kComparison},
    {"==", TokenType::kComparison},     {"!=", TokenType::kComparison},
    {"<", TokenType::kComparison},      {">", TokenType::kComparison},
    {"+", TokenType::kAdditive},        {"-", TokenType::kAdditive},
    {"~", TokenType::kAdditive},        {"**", TokenType::kPower},
    {"*", TokenType::kMultiplicative},  {"//", TokenType::kMultiplicative},
    {"/", TokenType::kMultiplicative},  {"%", TokenType::kMultiplicative},
    {"=", TokenType::kEquals},
}};

class Lexer {
 public:
  explicit Lexer(std::string source) : source_(std::move(source)) {}

  Result<std::vector<Token>, std::string> run() {
    while (position_ < source_.size()) {
      if (!step()) {
        return unexpected(error_);
      }
    }
    return std::move(tokens_);
  }

 private:
  [[nodiscard]] bool at(std::string_view text) const {
    return std::string_view(source_).substr(position_).starts_with(text);
  }
  [[nodiscard]] char peek(std::size_t offset = 0) const {
    return position_ + offset < source_.size() ? source_[position_ + offset] : '\0';
  }
  [[nodiscard]] TokenType last_type() const { return tokens_.empty() ? TokenType::kText : tokens_.back().type; }
  [[nodiscard]] bool outside_tags() const {
    return tokens_.empty() || last_type() == TokenType::kCloseStatement || last_type() == TokenType::kCloseExpression ||
           last_type() == TokenType::kComment;
  }

  bool fail(std::string message) {
    error_ = std::move(message);
    return false;
  }

  void strip_trailing_whitespace() {
    if (tokens_.empty() || tokens_.back().type != TokenType::kText) {
      return;
    }
    std::string& text = tokens_.back().value;
    while (!text.empty() && is_space(text.back())) {
      text.pop_back();
    }
    if (text.empty()) {
      tokens_.pop_back();
    }
  }
  void skip_whitespace() {
    while (position_ < source_.size() && is_space(source_[position_])) {
      ++position_;
    }
  }

  bool step() {
    if (outside_tags()) {
      std::size_t start = position_;
      while (position_ < source_.size() &&
             !(source_[position_] == '{' && (peek(1) == '%' || peek(1) == '{' || peek(1) == '#'))) {
        ++position_;
      }
      if (position_ > start) {
        tokens_.push_back({TokenType::kText, source_.substr(start, position_ - start)});
        return true;
      }
    }
    if (at("{#")) {
      return comment();
    }
    if (at("{%-")) {
      strip_trailing_whitespace();
      tokens_.push_back({TokenType::kOpenStatement, "{%"});
      position_ += 3;
      return true;
    }
    if (at("{{-")) {
      strip_trailing_whitespace();
      tokens_.push_back({TokenType::kOpenExpression, "{{"});
      brace_depth_ = 0;
      position_ += 3;
      return true;
    }
    skip_whitespace();
    if (position_ >= source_.size()) {
      return true;
    }
    if (at("-%}") || at("-}}")) {
      tokens_.push_back(at("-%}") ? Token{TokenType::kCloseStatement, "%}"} : Token{TokenType::kCloseExpression, "}}"});
      position_ += 3;
      skip_whitespace();
      return true;
    }
    char symbol = peek();
    if ((symbol == '-' || symbol == '+') && !binary_context()) {
      return signed_number(symbol);
    }
    for (const auto& [text, type] : kSymbols) {
      if (text == "}}" && brace_depth_ > 0) {
        continue;  // inside an object literal
      }
      if (!at(text)) {
        continue;
      }
      tokens_.push_back({type, std::string(text)});
      if (type == TokenType::kOpenExpression) {
        brace_depth_ = 0;
      }
      if (type == TokenType::kOpenBrace) {
        ++brace_depth_;
      }
      if (type == TokenType::kCloseBrace) {
        --brace_depth_;
      }
      position_ += text.size();
      return true;
    }
    if (symbol == '\'' || symbol == '"') {
      return string_literal(symbol);
    }
    if (is_digit(symbol)) {
      return number();
    }
    if (is_word(symbol)) {
      std::size_t start = position_;
      while (position_ < source_.size() && is_word(source_[position_])) {
        ++position_;
      }
      tokens_.push_back({TokenType::kIdentifier, source_.substr(start, position_ - start)});
      return true;
    }
    return fail(std::string("unexpected character '") + symbol + "'");
  }

  // After a value a sign is an operator; anywhere else it is a sign.
  [[nodiscard]] bool binary_context() const {
    switch (last_type()) {
      case TokenType::kIdentifier:
      case TokenType::kNumber:
      case TokenType::kString:
      case TokenType::kCloseParen:
      case TokenType::kCloseBracket:
        return true;
      default:
        return false;
    }
  }

  bool signed_number(char sign) {
    if (tokens_.empty() || last_type() == TokenType::kText) {
      return fail(std::string("unexpected character ") + sign);
    }
    ++position_;
    std::string digits = digits_here();
    if (!digits.empty() && peek() == '.' && is_digit(peek(1))) {
      ++position_;
      digits += "." + digits_here();
    }
    tokens_.push_back(digits.empty() ? Token{TokenType::kUnary, std::string(1, sign)}
                                     : Token{TokenType::kNumber, std::string(1, sign) + digits});
    return true;
  }

  std::string digits_here() {
    std::size_t start = position_;
    while (position_ < source_.size() && is_digit(source_[position_])) {
      ++position_;
    }
    return source_.substr(start, position_ - start);
  }

  bool number() {
    std::string digits = digits_here();
    if (last_type() != TokenType::kDot && peek() == '.' && is_digit(peek(1))) {
      ++position_;
      digits += "." + digits_here();
    }
    tokens_.push_back({TokenType::kNumber, digits});
    return true;
  }

  bool string_literal(char quote) {
    ++position_;
    std::string value;
    while (true) {
      if (position_ >= source_.size()) {
        return fail("unterminated string literal");
      }
      char symbol = source_[position_++];
      if (symbol == quote) {
        break;
      }
      if (symbol != '\\') {
        value += symbol;
        continue;
      }
      if (position_ >= source_.size()) {
        return fail("unexpected end of input");
      }
      char escaped = source_[position_++];
      switch (escaped) {
        case 'n':
          value += '\n';
          break;
        case 't':
          value += '\t';
          break;
        case 'r':
          value += '\r';
          break;
        case 'b':
          value += '\b';
          break;
        case 'f':
          value += '\f';
          break;
        case 'v':
          value += '\v';
          break;
        case '\'':
        case '"':
        case '\\':
          value += escaped;
          break;
        case 'x':
        case 'u': {
          std::size_t length = escaped == 'x' ? 2 : 4;
          if (position_ + length > source_.size()) {
            return fail("invalid hexadecimal escape");
          }
          std::string hex = source_.substr(position_, length);
          if (hex.find_first_not_of("0123456789abcdefABCDEF") != std::string::npos) {
            return fail("invalid hexadecimal escape");
          }
          append_code_unit(value, static_cast<char32_t>(std::stoul(hex, nullptr, 16)));
          position_ += length;
          break;
        }
        default:
          return fail(std::string("unexpected escaped character: ") + escaped);
      }
    }
    tokens_.push_back({TokenType::kString, std::move(value)});
    return true;
  }

  static void append_code_unit(std::string& out, char32_t code_point) {
    if (code_point < 0x80) {
      out += static_cast<char>(code_point);
    } else if (code_point < 0x800) {
      out += static_cast<char>(0xC0 | (code_point >> 6));
      out += static_cast<char>(0x80 | (code_point & 0x3F));
    } else {
      out += static_cast<char>(0xE0 | (code_point >> 12));
      out += static_cast<char>(0x80 | ((code_point >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (code_point & 0x3F));
    }
  }

  bool comment() {
    position_ += 2;
    bool strip_before = peek() == '-';
    if (strip_before) {
      ++position_;
    }
    std::size_t end = source_.find("#}", position_);
    if (end == std::string::npos) {
      return fail("missing end of comment tag");
    }
    std::string text = source_.substr(position_, end - position_);
    bool strip_after = !text.empty() && text.back() == '-';
    if (strip_before) {
      strip_trailing_whitespace();
    }
    tokens_.push_back({TokenType::kComment, std::move(text)});
    position_ = end + 2;
    if (strip_after) {
      skip_whitespace();
    }
    return true;
  }

  std::string source_;
  std::size_t position_ = 0;
  int brace_depth_ = 0;
  std::vector<Token> tokens_;
  std::string error_;
};

}  // namespace

std::string preprocess_template(std::string_view source) {
  std::string text(source);
  if (!text.empty() && text.back() == '\n') {
    text.pop_back();
  }
  // lstrip_blocks: spaces and tabs from a line's start up to a block tag.
  std::string stripped;
  stripped.reserve(text.size());
  std::size_t line_start = 0;
  while (line_start <= text.size()) {
    std::size_t line_end = text.find('\n', line_start);
    if (line_end == std::string::npos) {
      line_end = text.size();
    }
    std::size_t first = line_start;
    while (first < line_end && (text[first] == ' ' || text[first] == '\t')) {
      ++first;
    }
    bool block = first + 1 < text.size() && text[first] == '{' &&
                 (text[first + 1] == '#' || text[first + 1] == '%' || text[first + 1] == '-');
    stripped.append(text, block ? first : line_start, line_end - (block ? first : line_start));
    if (line_end < text.size()) {
      stripped += '\n';
    }
    line_start = line_end + 1;
  }
  // trim_blocks: the newline right after a block tag.
  std::string trimmed;
  trimmed.reserve(stripped.size());
  for (std::size_t index = 0; index < stripped.size(); ++index) {
    trimmed += stripped[index];
    if (index >= 1 && stripped[index] == '}' && index + 1 < stripped.size() && stripped[index + 1] == '\n' &&
        (stripped[index - 1] == '#' || stripped[index - 1] == '%' || stripped[index - 1] == '-')) {
      ++index;
    }
  }
  return trimmed;
}

Result<std::vector<Token>, std::string> tokenize_template(std::string_view source) {
  return Lexer(preprocess_template(source)).run();
}

}  // namespace kvgate::chat_template
