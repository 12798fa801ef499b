#pragma once
// The parsed template: one node type with a kind, as the reference's AST
// has (Program, If, For, Set, Macro, and the expression nodes).
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "kvgate/chat_template/value.hpp"

namespace kvgate::chat_template {

enum class NodeKind {
  // statements
  kText,
  kSet,
  kIf,
  kFor,
  kMacro,
  kBreak,
  kContinue,
  kComment,
  // expressions
  kLiteral,
  kIdentifier,
  kList,
  kTuple,
  kObject,
  kMember,
  kSlice,
  kCall,
  kUnary,
  kBinary,
  kFilter,
  kTest,
  kSelect,
  kTernary,
  kKeywordArgument,
};

// kBinary's operator, resolved when parsed so that evaluation does not
// compare names.
enum class Operator : std::uint8_t {
  kOther,  // evaluation reports it as unknown, by name
  kAnd,
  kOr,
  kEqual,
  kNotEqual,
  kIn,
  kNotIn,
  kConcatenate,  // ~
  kAdd,
  kSubtract,
  kMultiply,
  kDivide,
  kFloorDivide,
  kModulo,
  kPower,
  kLess,
  kGreater,
  kLessEqual,
  kGreaterEqual,
};
Operator operator_named(std::string_view name);

struct Node;
using NodePointer = std::unique_ptr<Node>;
using NodeList = std::vector<NodePointer>;

struct Node {
  NodeKind kind;
  std::string name;                // identifier, operator, filter or test name, keyword, macro name
  Value literal;                   // kLiteral; kText's text
  bool flag = false;               // kMember: computed ([...]); kTest: negated
  Operator op = Operator::kOther;  // kBinary
  // Operands, by kind:
  //   kSet: [target, value?]        kIf: [test]        kFor: [target, iterable, filter?]
  //   kMacro: parameters            kList/kTuple: items kObject: key, value, key, value...
  //   kMember: [object, property]   kSlice: [start?, stop?, step?] (null = absent)
  //   kCall: [callee, arguments...] kUnary: [operand]  kBinary: [left, right]
  //   kFilter: [operand, filter (identifier or call)]  kTest: [operand]
  //   kSelect: [value, test]        kTernary: [test, then, else]  kKeywordArgument: [value]
  NodeList operands;
  NodeList body;       // kSet (block form), kIf, kFor, kMacro
  NodeList alternate;  // kIf's else/elif, kFor's else
};

}  // namespace kvgate::chat_template
