#include "parser.hpp"

#include <charconv>
#include <stdexcept>

namespace kvgate::chat_template {

Operator operator_named(std::string_view name) {
  static constexpr std::pair<std::string_view, Operator> kOperators[] = {
      {"and", Operator::kAnd},       {"or", Operator::kOr},        {"==", Operator::kEqual},
      {"!=", Operator::kNotEqual},   {"in", Operator::kIn},        {"not in", Operator::kNotIn},
      {"~", Operator::kConcatenate}, {"+", Operator::kAdd},        {"-", Operator::kSubtract},
      {"*", Operator::kMultiply},    {"/", Operator::kDivide},     {"//", Operator::kFloorDivide},
      {"%", Operator::kModulo},      {"**", Operator::kPower},     {"<", Operator::kLess},
      {">", Operator::kGreater},     {"<=", Operator::kLessEqual}, {">=", Operator::kGreaterEqual},
  };
  for (const auto& [known, op] : kOperators) {
    if (known == name) {
      return op;
    }
  }
  return Operator::kOther;
}

namespace {

// Templates are parsed at start-up, so a parse error may unwind the parser;
// parse_template turns it into a value.
struct ParseError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Deeper nesting than any real template; keeps hostile input off the stack limit.
constexpr int kMaxDepth = 256;

NodePointer make(NodeKind kind, std::string name = {}) {
  auto node = std::make_unique<Node>();
  node->kind = kind;
  node->name = std::move(name);
  return node;
}

class Parser {
 public:
  explicit Parser(const std::vector<Token>& tokens) : tokens_(tokens) {}

  NodeList program() {
    NodeList body;
    while (position_ < tokens_.size()) {
      body.push_back(any());
    }
    return body;
  }

 private:
  struct DepthGuard {
    explicit DepthGuard(int& depth) : depth_(depth) {
      if (++depth_ > kMaxDepth) {
        throw ParseError("template nests too deeply");
      }
    }
    ~DepthGuard() { --depth_; }
    DepthGuard(const DepthGuard&) = delete;
    DepthGuard& operator=(const DepthGuard&) = delete;
    int& depth_;
  };

  [[nodiscard]] bool is(TokenType type, std::size_t offset = 0) const {
    return position_ + offset < tokens_.size() && tokens_[position_ + offset].type == type;
  }
  [[nodiscard]] bool is_identifier(std::string_view name, std::size_t offset = 0) const {
    return is(TokenType::kIdentifier, offset) && tokens_[position_ + offset].value == name;
  }
  [[nodiscard]] bool is_statement(std::initializer_list<std::string_view> names) const {
    if (!is(TokenType::kOpenStatement)) {
      return false;
    }
    for (auto name : names) {
      if (is_identifier(name, 1)) {
        return true;
      }
    }
    return false;
  }
  const Token& next() {
    if (position_ >= tokens_.size()) {
      throw ParseError("unexpected end of template");
    }
    return tokens_[position_++];
  }
  void expect(TokenType type, const char* message) {
    if (!is(type)) {
      throw ParseError(message);
    }
    ++position_;
  }
  void expect_identifier(std::string_view name) {
    if (!is_identifier(name)) {
      throw ParseError("expected " + std::string(name));
    }
    ++position_;
  }
  // Statement bodies end at one of `ends`; reaching the end of the template instead is an error.
  void body_until(NodeList& body, std::initializer_list<std::string_view> ends) {
    while (!is_statement(ends)) {
      if (position_ >= tokens_.size()) {
        throw ParseError("missing {% " + std::string(*ends.begin()) + " %}");
      }
      body.push_back(any());
    }
  }

  NodePointer any() {
    DepthGuard guard(depth_);
    const Token& token = tokens_[position_];
    switch (token.type) {
      case TokenType::kComment: {
        ++position_;
        return make(NodeKind::kComment);
      }
      case TokenType::kText: {
        ++position_;
        auto node = make(NodeKind::kText);
        node->literal = Value(token.value);
        return node;
      }
      case TokenType::kOpenStatement:
        return statement();
      case TokenType::kOpenExpression: {
        ++position_;
        auto expression_node = expression();
        expect(TokenType::kCloseExpression, "expected }}");
        return expression_node;
      }
      default:
        throw ParseError("unexpected token " + token.value);
    }
  }

  NodePointer statement() {
    expect(TokenType::kOpenStatement, "expected {%");
    if (!is(TokenType::kIdentifier)) {
      throw ParseError("expected a statement name");
    }
    std::string name = next().value;
    NodePointer result;
    if (name == "set") {
      result = set_statement();
    } else if (name == "if") {
      result = if_statement();
      expect(TokenType::kOpenStatement, "expected {%");
      expect_identifier("endif");
      expect(TokenType::kCloseStatement, "expected %}");
    } else if (name == "for") {
      result = for_statement();
      expect(TokenType::kOpenStatement, "expected {%");
      expect_identifier("endfor");
      expect(TokenType::kCloseStatement, "expected %}");
    } else if (name == "macro") {
      result = macro_statement();
      expect(TokenType::kOpenStatement, "expected {%");
      expect_identifier("endmacro");
      expect(TokenType::kCloseStatement, "expected %}");
    } else if (name == "break" || name == "continue") {
      result = make(name == "break" ? NodeKind::kBreak : NodeKind::kContinue);
      expect(TokenType::kCloseStatement, "expected %}");
    } else {
      throw ParseError("unsupported statement '" + name + "'");
    }
    return result;
  }

  NodePointer set_statement() {
    auto node = make(NodeKind::kSet);
    node->operands.push_back(expression_sequence(false));
    if (is(TokenType::kEquals)) {
      ++position_;
      node->operands.push_back(expression_sequence(false));
    } else {
      expect(TokenType::kCloseStatement, "expected %}");
      body_until(node->body, {"endset"});
      expect(TokenType::kOpenStatement, "expected {%");
      expect_identifier("endset");
    }
    expect(TokenType::kCloseStatement, "expected %}");
    return node;
  }

  NodePointer if_statement() {
    DepthGuard guard(depth_);
    auto node = make(NodeKind::kIf);
    node->operands.push_back(expression());
    expect(TokenType::kCloseStatement, "expected %}");
    body_until(node->body, {"endif", "elif", "else"});
    if (is_statement({"elif"})) {
      position_ += 2;
      node->alternate.push_back(if_statement());
    } else if (is_statement({"else"})) {
      position_ += 2;
      expect(TokenType::kCloseStatement, "expected %}");
      body_until(node->alternate, {"endif"});
    }
    return node;
  }

  NodePointer macro_statement() {
    auto node = make(NodeKind::kMacro);
    if (!is(TokenType::kIdentifier)) {
      throw ParseError("expected a macro name");
    }
    node->name = next().value;
    expect(TokenType::kOpenParen, "expected (");
    node->operands = arguments();
    expect(TokenType::kCloseParen, "expected )");
    for (const auto& parameter : node->operands) {
      if (parameter->kind != NodeKind::kIdentifier && parameter->kind != NodeKind::kKeywordArgument) {
        throw ParseError("expected identifier for parameter declaration");
      }
    }
    expect(TokenType::kCloseStatement, "expected %}");
    body_until(node->body, {"endmacro"});
    return node;
  }

  NodePointer for_statement() {
    auto node = make(NodeKind::kFor);
    auto target = expression_sequence(true);
    if (target->kind != NodeKind::kIdentifier && target->kind != NodeKind::kTuple) {
      throw ParseError("expected identifier or tuple for the loop variable");
    }
    node->operands.push_back(std::move(target));
    expect_identifier("in");
    auto iterable = expression();
    // `for x in items if test`: the parser saw a select expression.
    if (iterable->kind == NodeKind::kSelect) {
      node->operands.push_back(std::move(iterable->operands[0]));
      node->operands.push_back(std::move(iterable->operands[1]));
    } else {
      node->operands.push_back(std::move(iterable));
    }
    expect(TokenType::kCloseStatement, "expected %}");
    body_until(node->body, {"endfor", "else"});
    if (is_statement({"else"})) {
      position_ += 2;
      expect(TokenType::kCloseStatement, "expected %}");
      body_until(node->alternate, {"endfor"});
    }
    return node;
  }

  NodePointer expression_sequence(bool primary_only) {
    NodeList items;
    items.push_back(primary_only ? primary() : expression());
    bool tuple = is(TokenType::kComma);
    while (is(TokenType::kComma)) {
      ++position_;
      items.push_back(primary_only ? primary() : expression());
    }
    if (!tuple) {
      return std::move(items.front());
    }
    auto node = make(NodeKind::kTuple);
    node->operands = std::move(items);
    return node;
  }

  NodePointer expression() {
    DepthGuard guard(depth_);
    auto value = logical_or();
    if (!is_identifier("if")) {
      return value;
    }
    ++position_;
    auto test = logical_or();
    if (is_identifier("else")) {
      ++position_;
      auto node = make(NodeKind::kTernary);
      node->operands.push_back(std::move(test));
      node->operands.push_back(std::move(value));
      node->operands.push_back(expression());
      return node;
    }
    auto node = make(NodeKind::kSelect);
    node->operands.push_back(std::move(value));
    node->operands.push_back(std::move(test));
    return node;
  }

  NodePointer binary(std::string name, NodePointer left, NodePointer right) {
    auto node = make(NodeKind::kBinary, std::move(name));
    node->op = operator_named(node->name);
    node->operands.push_back(std::move(left));
    node->operands.push_back(std::move(right));
    return node;
  }

  NodePointer logical_or() {
    auto left = logical_and();
    while (is_identifier("or")) {
      ++position_;
      left = binary("or", std::move(left), logical_and());
    }
    return left;
  }

  NodePointer logical_and() {
    auto left = logical_not();
    while (is_identifier("and")) {
      ++position_;
      left = binary("and", std::move(left), logical_not());
    }
    return left;
  }

  NodePointer logical_not() {
    if (!is_identifier("not")) {
      return comparison();
    }
    DepthGuard guard(depth_);
    ++position_;
    auto node = make(NodeKind::kUnary, "not");
    node->operands.push_back(logical_not());
    return node;
  }

  NodePointer comparison() {
    auto left = additive();
    while (true) {
      std::string name;
      if (is_identifier("not") && is_identifier("in", 1)) {
        name = "not in";
        position_ += 2;
      } else if (is_identifier("in")) {
        name = "in";
        ++position_;
      } else if (is(TokenType::kComparison)) {
        name = next().value;
      } else {
        return left;
      }
      left = binary(std::move(name), std::move(left), additive());
    }
  }

  NodePointer additive() {
    auto left = multiplicative();
    while (is(TokenType::kAdditive)) {
      std::string name = next().value;
      left = binary(std::move(name), std::move(left), multiplicative());
    }
    return left;
  }

  NodePointer multiplicative() {
    auto left = power();
    while (is(TokenType::kMultiplicative)) {
      std::string name = next().value;
      left = binary(std::move(name), std::move(left), power());
    }
    return left;
  }

  NodePointer power() {
    auto left = test();
    while (is(TokenType::kPower)) {
      ++position_;
      left = binary("**", std::move(left), test());
    }
    return left;
  }

  NodePointer test() {
    auto operand = filter();
    while (is_identifier("is")) {
      ++position_;
      bool negate = is_identifier("not");
      if (negate) {
        ++position_;
      }
      if (!is(TokenType::kIdentifier)) {
        throw ParseError("expected a test name");
      }
      auto node = make(NodeKind::kTest, next().value);
      node->flag = negate;
      node->operands.push_back(std::move(operand));
      operand = std::move(node);
    }
    return operand;
  }

  NodePointer filter() {
    auto operand = unary_sign();
    while (is(TokenType::kPipe)) {
      ++position_;
      if (!is(TokenType::kIdentifier)) {
        throw ParseError("expected a filter name");
      }
      NodePointer name = make(NodeKind::kIdentifier, next().value);
      if (is(TokenType::kOpenParen)) {
        name = call(std::move(name));
      }
      auto node = make(NodeKind::kFilter);
      node->operands.push_back(std::move(operand));
      node->operands.push_back(std::move(name));
      operand = std::move(node);
    }
    return operand;
  }

  NodePointer unary_sign() {
    if ((is(TokenType::kUnary) || is(TokenType::kAdditive)) &&
        (tokens_[position_].value == "-" || tokens_[position_].value == "+")) {
      DepthGuard guard(depth_);
      auto node = make(NodeKind::kUnary, next().value);
      node->operands.push_back(unary_sign());
      return node;
    }
    auto member_node = member(primary());
    return is(TokenType::kOpenParen) ? call(std::move(member_node)) : std::move(member_node);
  }

  NodePointer call(NodePointer callee) {
    DepthGuard guard(depth_);
    auto node = make(NodeKind::kCall);
    node->operands.push_back(std::move(callee));
    expect(TokenType::kOpenParen, "expected (");
    for (auto& argument : arguments()) {
      node->operands.push_back(std::move(argument));
    }
    expect(TokenType::kCloseParen, "expected )");
    auto result = member(std::move(node));
    return is(TokenType::kOpenParen) ? call(std::move(result)) : std::move(result);
  }

  NodeList arguments() {
    NodeList list;
    bool keyword_seen = false;
    while (!is(TokenType::kCloseParen)) {
      if (position_ >= tokens_.size()) {
        throw ParseError("expected )");
      }
      auto argument = expression();
      if (is(TokenType::kEquals)) {
        ++position_;
        if (argument->kind != NodeKind::kIdentifier) {
          throw ParseError("expected identifier for keyword argument");
        }
        auto keyword = make(NodeKind::kKeywordArgument, argument->name);
        keyword->operands.push_back(expression());
        argument = std::move(keyword);
        keyword_seen = true;
      } else if (keyword_seen) {
        throw ParseError("positional arguments must come before keyword arguments");
      }
      list.push_back(std::move(argument));
      if (is(TokenType::kComma)) {
        ++position_;
      }
    }
    return list;
  }

  NodePointer member(NodePointer object) {
    while (is(TokenType::kDot) || is(TokenType::kOpenBracket)) {
      bool computed = next().type == TokenType::kOpenBracket;
      auto node = make(NodeKind::kMember);
      node->flag = computed;
      node->operands.push_back(std::move(object));
      if (computed) {
        node->operands.push_back(subscript());
        expect(TokenType::kCloseBracket, "expected ]");
      } else {
        auto property = primary();
        bool integer = property->kind == NodeKind::kLiteral && property->literal.is(Value::Kind::kInteger);
        if (property->kind != NodeKind::kIdentifier && !integer) {
          throw ParseError("expected identifier or integer following dot operator");
        }
        node->operands.push_back(std::move(property));
      }
      object = std::move(node);
    }
    return object;
  }

  // obj[expr] or a slice obj[start:stop:step].
  NodePointer subscript() {
    NodeList parts;
    bool slice = false;
    while (!is(TokenType::kCloseBracket)) {
      if (position_ >= tokens_.size()) {
        throw ParseError("expected ]");
      }
      if (is(TokenType::kColon)) {
        parts.push_back(nullptr);
        ++position_;
        slice = true;
      } else {
        parts.push_back(expression());
        if (is(TokenType::kColon)) {
          ++position_;
          slice = true;
        }
      }
    }
    if (parts.empty()) {
      throw ParseError("expected at least one argument for member/slice expression");
    }
    if (!slice) {
      return std::move(parts.front());
    }
    if (parts.size() > 3) {
      throw ParseError("expected 0-3 arguments for slice expression");
    }
    auto node = make(NodeKind::kSlice);
    node->operands = std::move(parts);
    node->operands.resize(3);
    return node;
  }

  NodePointer primary() {
    DepthGuard guard(depth_);
    const Token& token = next();
    switch (token.type) {
      case TokenType::kNumber:
        return number(token.value);
      case TokenType::kString: {
        std::string value = token.value;
        while (is(TokenType::kString)) {
          value += next().value;  // adjacent literals concatenate
        }
        auto node = make(NodeKind::kLiteral);
        node->literal = Value(std::move(value));
        return node;
      }
      case TokenType::kIdentifier:
        return make(NodeKind::kIdentifier, token.value);
      case TokenType::kOpenParen: {
        auto inner = expression_sequence(false);
        expect(TokenType::kCloseParen, "expected )");
        return inner;
      }
      case TokenType::kOpenBracket: {
        auto node = make(NodeKind::kList);
        while (!is(TokenType::kCloseBracket)) {
          if (position_ >= tokens_.size()) {
            throw ParseError("expected ]");
          }
          node->operands.push_back(expression());
          if (is(TokenType::kComma)) {
            ++position_;
          }
        }
        ++position_;
        return node;
      }
      case TokenType::kOpenBrace: {
        auto node = make(NodeKind::kObject);
        while (!is(TokenType::kCloseBrace)) {
          if (position_ >= tokens_.size()) {
            throw ParseError("expected }");
          }
          node->operands.push_back(expression());
          expect(TokenType::kColon, "expected colon between key and value in object literal");
          node->operands.push_back(expression());
          if (is(TokenType::kComma)) {
            ++position_;
          }
        }
        ++position_;
        return node;
      }
      default:
        throw ParseError("unexpected token '" + token.value + "'");
    }
  }

  static NodePointer number(const std::string& text) {
    auto node = make(NodeKind::kLiteral);
    if (text.find('.') != std::string::npos) {
      node->literal = Value(std::stod(text));
    } else {
      std::int64_t value = 0;
      auto result = std::from_chars(text.data() + (text[0] == '+' ? 1 : 0), text.data() + text.size(), value);
      if (result.ec != std::errc()) {
        throw ParseError("number out of range: " + text);
      }
      node->literal = Value(value);
    }
    return node;
  }

  const std::vector<Token>& tokens_;
  std::size_t position_ = 0;
  int depth_ = 0;
};

}  // namespace

Result<NodeList, std::string> parse_template(const std::vector<Token>& tokens) {
  try {
    return Parser(tokens).program();
  } catch (const ParseError& error) {
    return unexpected(std::string(error.what()));
  } catch (const std::exception& error) {
    return unexpected(std::string("template parse error: ") + error.what());
  }
}

}  // namespace kvgate::chat_template
