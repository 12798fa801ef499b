#pragma once
// Template source to tokens, the way the reference (@huggingface/jinja)
// reads chat templates: trim_blocks and lstrip_blocks on (as transformers
// and vLLM configure Jinja for chat templates), the final newline dropped,
// {%- -%} {{- -}} {#- -#} strip the whitespace next to them.
#include <string>
#include <string_view>
#include <vector>

#include "kvgate/core/result.hpp"

namespace kvgate::chat_template {

enum class TokenType {
  kText,
  kNumber,
  kString,
  kIdentifier,
  kEquals,
  kOpenParen,
  kCloseParen,
  kOpenStatement,
  kCloseStatement,
  kOpenExpression,
  kCloseExpression,
  kOpenBracket,
  kCloseBracket,
  kOpenBrace,
  kCloseBrace,
  kComma,
  kDot,
  kColon,
  kPipe,
  kAdditive,        // + - ~
  kMultiplicative,  // * / // %
  kPower,           // **
  kComparison,      // < > <= >= == !=
  kUnary,           // a sign that is not a binary operator
  kComment,
};

struct Token {
  TokenType type;
  std::string value;
};

std::string preprocess_template(std::string_view source);
Result<std::vector<Token>, std::string> tokenize_template(std::string_view source);

}  // namespace kvgate::chat_template
