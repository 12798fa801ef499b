#pragma once
// Evaluates a parsed template. Errors never unwind: the first one is kept in
// the RenderContext, every loop and block stops once it is set, and render
// returns it as a value.
#include <absl/container/inlined_vector.h>

#include <ctime>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ast.hpp"
#include "kvgate/chat_template/value.hpp"
#include "memo.hpp"

namespace kvgate::chat_template {

class Scope {
 public:
  explicit Scope(const Scope* parent = nullptr) : parent_(parent) {}
  [[nodiscard]] const Scope* parent() const { return parent_; }
  // This scope's own variable, not its parents'.
  [[nodiscard]] const Value* find_here(std::string_view name) const {
    for (const auto& [key, value] : variables_) {
      if (key == name) return &value;
    }
    return nullptr;
  }
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
  // Scopes are made per loop, iteration and macro call and hold a few
  // names each: inline room for four keeps most of them off the heap.
  absl::InlinedVector<std::pair<std::string, Value>, 4> variables_;
};

struct RenderContext {
  std::string error;
  enum class Flow { kNormal, kBreak, kContinue } flow = Flow::kNormal;
  std::tm now{};            // strftime_now's clock, supplied by the caller
  Scope* caller = nullptr;  // the scope a macro is called from
  int depth = 0;            // macro recursion
  std::size_t output_limit = 0;
  std::uint64_t step_limit = 0;
  std::uint64_t steps = 0;  // counted with or without a limit: a replayed iteration adds its recorded steps
  // Incremental rendering (memo.hpp): the memo, the template it belongs to,
  // and what makes an iteration unrecordable.
  IterationMemo* memo = nullptr;
  std::shared_ptr<const void> program;
  std::uint64_t macro_calls = 0;  // a macro's body runs in an interpreter of its own, unrecorded
  std::uint64_t clock_reads = 0;  // strftime_now: the output depends on `now`

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
  void set_variable(Scope& scope, const std::string& name, Value value);

  // Incremental rendering (memo.hpp). While an iteration of a loop is
  // recorded, reads that resolve at or above that loop's scope become its
  // dependencies and writes there its effects.
  struct Recording {
    const Scope* loop_scope = nullptr;
    IterationRecord record;
    std::vector<std::string_view> written;  // loop-scope variables the iteration set
    std::vector<std::pair<const Namespace*, std::string_view>> written_attributes;
    std::vector<const Namespace*> created;                                  // namespaces made by the iteration
    std::vector<std::pair<std::string_view, const Namespace*>> namespaces;  // kNamespace dependencies, in order
    std::uint64_t internal_reads = 0;  // reads of what the iteration itself made or set
    int test_depth = 0;                // inside an `if` test
    bool large_in_test = false;        // the test read a long list whole
    bool recordable = true;
  };
  // One iteration of `loop` (its item set in `loop_scope`): replayed from
  // the memo when its dependencies still hold, else evaluated and recorded.
  // Returns the iteration's flow. `unrecorded_run` counts the loop's
  // iterations in a row that were evaluated and could not be recorded.
  RenderContext::Flow iterate(const Node& loop, const Value& item, Scope& loop_scope, std::string& out,
                              int& unrecorded_run);
  [[nodiscard]] bool still_holds(const IterationRecord& record, Scope& loop_scope);
  bool replay(const IterationRecord& record, Scope& loop_scope, std::string& out);
  void finish_recording(Recording& recording, Scope& loop_scope);
  // A variable read while recording: a dependency when it resolves outside
  // the iteration.
  Value read_variable(const std::string& name, const Scope& scope);
  const Value* resolve(std::string_view name, const Scope& scope, bool& external);
  // `name.attribute` on a namespace variable while recording.
  bool read_attribute(const Node& object_node, std::string_view attribute, const Scope& scope, Value& result);
  bool note_namespace(std::string_view name, const Namespace* space);
  void add_dependency(Dependency dependency);
  void abandon_recording();

  Recording* recording_ = nullptr;
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
Value apply_filter(std::string_view name, const Value& operand, Arguments& arguments, RenderContext& context);
Value run_test(std::string_view name, const Value& operand, RenderContext& context);
// A string's, list's or mapping's attribute or method, bound to it.
Value member_of(const Value& object, std::string_view name);
// object.name(arguments) for a built-in method, without binding it first
// (the common case in templates); false when `name` is not one.
bool call_method(const Value& object, std::string_view name, Arguments& arguments, RenderContext& context,
                 Value& result);
void add_globals(Scope& scope);
// `operation` names the operator in errors.
Value binary_operation(Operator op, std::string_view operation, const Value& left, const Value& right,
                       RenderContext& context);

}  // namespace kvgate::chat_template
