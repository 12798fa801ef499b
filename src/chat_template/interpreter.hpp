#pragma once
// Evaluates a parsed template. Errors never unwind: the first one is kept in
// the RenderContext, every loop and block stops once it is set, and render
// returns it as a value.
#include <ctime>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ast.hpp"
#include "kvgate/chat_template/value.hpp"

namespace kvgate::chat_template {

class Scope {
 public:
  explicit Scope(const Scope* parent = nullptr) : parent_(parent) {}
  [[nodiscard]] const Value* lookup(std::string_view name) const {
    for (const Scope* scope = this; scope != nullptr; scope = scope->parent_) {
      for (const auto& [key, value] : scope->variables_) {
        if (key == name) return &value;
      }
    }
    return nullptr;
  }
  void set(std::string_view name, Value value) {
    for (auto& [key, existing] : variables_) {
      if (key == name) {
        existing = std::move(value);
        return;
      }
    }
    variables_.emplace_back(std::string(name), std::move(value));
  }

 private:
  const Scope* parent_;  // only read
  std::vector<std::pair<std::string, Value>> variables_;
};

struct RenderContext {
  std::string error;
  enum class Flow { kNormal, kBreak, kContinue } flow = Flow::kNormal;
  std::tm now{};            // strftime_now's clock, supplied by the caller
  Scope* caller = nullptr;  // the scope a macro is called from
  int depth = 0;            // macro recursion
  std::size_t output_limit = 0;
  std::uint64_t step_limit = 0;
  std::uint64_t steps = 0;

  [[nodiscard]] bool failed() const { return !error.empty(); }
  Value fail(std::string message) {
    if (error.empty()) error = message.empty() ? "template error" : std::move(message);
    return {};
  }
};

class Interpreter {
 public:
  explicit Interpreter(RenderContext& context) : context_(context) {}
  void render_block(const NodeList& block, Scope& scope, std::string& out);
  Value evaluate(const Node& node, Scope& scope);

 private:
  void render_statement(const Node& node, Scope& scope, std::string& out);
  void render_for(const Node& node, Scope& scope, std::string& out);
  void assign(const Node& target, const Value& value, Scope& scope);
  Value define_macro(const Node& node);
  bool append_concatenation(const Node& node, Scope& scope, std::string& out);
  Value evaluate_binary(const Node& node, Scope& scope);
  Value evaluate_member(const Node& node, Scope& scope);
  Value evaluate_call(const Node& node, Scope& scope);
  Value evaluate_filter(const Node& node, Scope& scope);
  Arguments evaluate_arguments(const NodeList& operands, std::size_t first, Scope& scope);

  RenderContext& context_;
};

// Built-ins (builtins.cpp).
Value apply_filter(const std::string& name, const Value& operand, Arguments& arguments, RenderContext& context);
Value run_test(const std::string& name, const Value& operand, RenderContext& context);
// A string's, list's or mapping's attribute or method, bound to it.
Value member_of(const Value& object, const std::string& name);
// object.name(arguments) for a built-in method, without binding it first
// (the common case in templates); false when `name` is not one.
bool call_method(const Value& object, const std::string& name, Arguments& arguments, RenderContext& context,
                 Value& result);
void add_globals(Scope& scope);
Value binary_operation(const std::string& operation, const Value& left, const Value& right, RenderContext& context);

}  // namespace kvgate::chat_template
