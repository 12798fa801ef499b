#pragma once
// Tokens to a tree, with the reference's grammar and operator precedence
// (lowest first): ternary and select `a if b`, or, and, not, comparisons and
// membership, + - ~, * / // %, **, is-tests, |filters, unary signs, calls and
// member access, primaries.
#include <string>
#include <vector>

#include "ast.hpp"
#include "kvgate/core/result.hpp"
#include "lexer.hpp"

namespace kvgate::chat_template {

Result<NodeList, std::string> parse_template(const std::vector<Token>& tokens);

}  // namespace kvgate::chat_template
