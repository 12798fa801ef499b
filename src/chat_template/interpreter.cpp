#include "interpreter.hpp"

#include <algorithm>
#include <optional>
#include <utility>

#include "kvgate/core/utf8.hpp"

namespace kvgate::chat_template {

namespace {

// Deeper macro recursion than any chat template needs; bounds hostile ones.
constexpr int kMaxCallDepth = 64;

// Whether `value` is or contains `space` (values are acyclic: assignment
// refuses the one way to close a cycle, below).
bool holds_namespace(const Value& value, const Namespace* space) {
  switch (value.kind()) {
    case Value::Kind::kNamespace:
      if (&value.as_namespace() == space) {
        return true;
      }
      return std::any_of(value.as_namespace().entries.begin(), value.as_namespace().entries.end(),
                         [&](const auto& entry) { return holds_namespace(entry.second, space); });
    case Value::Kind::kMapping:
      return std::any_of(value.as_mapping().begin(), value.as_mapping().end(),
                         [&](const auto& entry) { return holds_namespace(entry.second, space); });
    case Value::Kind::kList:
      return std::any_of(value.as_list().begin(), value.as_list().end(),
                         [&](const Value& item) { return holds_namespace(item, space); });
    default:
      return false;
  }
}

std::vector<std::string> code_points(const std::string& text) {
  std::vector<std::string> points;
  std::size_t position = 0;
  while (position < text.size()) {
    std::size_t start = position;
    kvgate::next_code_point(text, position);
    points.push_back(text.substr(start, position - start));
  }
  return points;
}

// Python's slice rules on `length` items (the reference's slice helper).
std::vector<std::size_t> slice_indices(std::size_t length, const Value* start_value, const Value* stop_value,
                                       const Value* step_value) {
  auto size = static_cast<std::int64_t>(length);
  std::int64_t step = step_value ? step_value->as_integer() : 1;
  std::vector<std::size_t> indices;
  if (step == 0) {
    return indices;
  }
  std::int64_t start = 0;
  std::int64_t stop = 0;
  if (step > 0) {
    start = start_value ? start_value->as_integer() : 0;
    stop = stop_value ? stop_value->as_integer() : size;
    start = start < 0 ? std::max<std::int64_t>(size + start, 0) : std::min(start, size);
    stop = stop < 0 ? std::max<std::int64_t>(size + stop, 0) : std::min(stop, size);
    for (std::int64_t index = start; index < stop; index += step) {
      indices.push_back(static_cast<std::size_t>(index));
    }
  } else {
    start = start_value ? start_value->as_integer() : size - 1;
    stop = stop_value ? stop_value->as_integer() : -1;
    start = start < 0 ? std::max<std::int64_t>(size + start, -1) : std::min(start, size - 1);
    stop = stop < -1 ? std::max<std::int64_t>(size + stop, -1) : std::min(stop, size - 1);
    for (std::int64_t index = start; index > stop; index += step) {
      indices.push_back(static_cast<std::size_t>(index));
    }
  }
  return indices;
}

}  // namespace

void Interpreter::render_block(const NodeList& block, Scope& scope, std::string& out) {
  for (const auto& node : block) {
    if (context_.failed() || context_.flow != RenderContext::Flow::kNormal) {
      return;
    }
    render_statement(*node, scope, out);
    if (context_.output_limit != 0 && out.size() > context_.output_limit) {
      context_.fail("rendered prompt exceeds " + std::to_string(context_.output_limit) + " bytes");
    }
  }
}

void Interpreter::render_statement(const Node& node, Scope& scope, std::string& out) {
  if (++context_.steps > context_.step_limit && context_.step_limit != 0) {
    context_.fail("the chat template took more than " + std::to_string(context_.step_limit) + " steps");
    return;
  }
  switch (node.kind) {
    case NodeKind::kText:
      out += node.literal.as_string();
      return;
    case NodeKind::kComment:
      return;
    case NodeKind::kSet: {
      if (node.operands.size() == 2) {
        assign(*node.operands[0], evaluate(*node.operands[1], scope), scope);
      } else {
        std::string captured;
        render_block(node.body, scope, captured);
        assign(*node.operands[0], Value(std::move(captured)), scope);
      }
      return;
    }
    case NodeKind::kIf: {
      if (recording_ == nullptr) {
        render_block(evaluate(*node.operands[0], scope).truthy() ? node.body : node.alternate, scope, out);
        return;
      }
      // A test that reads only what the iteration found, some of it state
      // that moves from turn to turn (namespace attributes, `loop.*`, whole
      // lists), is remembered by its outcome instead of by the values it
      // read: Qwen3's `loop.index0 > ns.last_query_index` stays false for
      // earlier turns while last_query_index moves on. Tests of the item
      // alone keep their reads, which validate by identity without
      // evaluating anything.
      Recording* recording = recording_;
      auto mark = recording->record.dependencies.size();
      auto internal_reads = recording->internal_reads;
      recording->large_in_test = false;
      ++recording->test_depth;
      bool holds = evaluate(*node.operands[0], scope).truthy();
      --recording->test_depth;
      if (recording_ == recording && !context_.failed()) {
        auto& dependencies = recording->record.dependencies;
        bool moving =
            recording->large_in_test || std::any_of(dependencies.begin() + static_cast<std::ptrdiff_t>(mark),
                                                    dependencies.end(), [](const Dependency& dependency) {
                                                      return dependency.kind == Dependency::Kind::kAttribute ||
                                                             dependency.kind == Dependency::Kind::kNamespace;
                                                    });
        if (recording->internal_reads == internal_reads && moving) {
          dependencies.resize(mark);
          Dependency test;
          test.kind = Dependency::Kind::kTest;
          test.test = node.operands[0].get();
          test.value = Value(holds);
          dependencies.push_back(std::move(test));
        } else if (recording->large_in_test) {
          abandon_recording();
        }
      }
      render_block(holds ? node.body : node.alternate, scope, out);
      return;
    }
    case NodeKind::kFor:
      render_for(node, scope, out);
      return;
    case NodeKind::kMacro:
      set_variable(scope, node.name, define_macro(node));
      return;
    case NodeKind::kBreak:
      context_.flow = RenderContext::Flow::kBreak;
      return;
    case NodeKind::kContinue:
      context_.flow = RenderContext::Flow::kContinue;
      return;
    default:
      if (append_concatenation(node, scope, out)) {
        return;
      }
      append_output(out, evaluate(node, scope));
  }
}

// `{{ a + b + c }}` with string operands appends each operand directly
// instead of building the intermediate strings; prompts are long.
bool Interpreter::append_concatenation(const Node& node, Scope& scope, std::string& out) {
  if (node.kind != NodeKind::kBinary || node.op != Operator::kAdd) {
    return false;
  }
  std::vector<const Node*> leaves;
  const Node* cursor = &node;
  while (cursor->kind == NodeKind::kBinary && cursor->op == Operator::kAdd) {
    leaves.push_back(cursor->operands[1].get());
    cursor = cursor->operands[0].get();
  }
  leaves.push_back(cursor);
  std::reverse(leaves.begin(), leaves.end());
  std::vector<Value> values;
  values.reserve(leaves.size());
  for (const Node* leaf : leaves) {
    values.push_back(evaluate(*leaf, scope));
  }
  if (context_.failed()) {
    return true;
  }
  if (!std::all_of(values.begin(), values.end(), [](const Value& value) { return value.is_string(); })) {
    Value total = values[0];
    for (std::size_t index = 1; index < values.size() && !context_.failed(); ++index) {
      total = binary_operation(Operator::kAdd, "+", total, values[index], context_);
    }
    if (!context_.failed()) {
      append_output(out, total);
    }
    return true;
  }
  for (const Value& value : values) {
    out += value.as_string();
  }
  return true;
}

void Interpreter::render_for(const Node& node, Scope& scope, std::string& out) {
  Scope loop_scope(&scope);
  Value iterable = evaluate(*node.operands[1], loop_scope);
  if (context_.failed()) {
    return;
  }
  // A list is iterated where it is (`iterable` keeps it alive: values are
  // immutable); mappings, strings and filtered loops build their own.
  List built;
  const List* listed = &built;
  if (iterable.is(Value::Kind::kList)) {
    listed = &iterable.as_list();
  } else if (iterable.is(Value::Kind::kMapping)) {
    for (const auto& [key, value] : iterable.as_mapping()) {
      built.emplace_back(key);
    }
  } else if (iterable.is_string()) {
    for (auto& point : code_points(iterable.as_string())) {
      built.emplace_back(std::move(point));
    }
  } else {
    context_.fail("expected iterable or object type in for loop: got " + std::string(iterable.type_name()));
    return;
  }
  const Node& target = *node.operands[0];
  if (node.operands.size() == 3) {  // for x in items if test
    List kept;
    for (const Value& item : *listed) {
      Scope test_scope(&loop_scope);
      assign(target, item, test_scope);
      if (evaluate(*node.operands[2], test_scope).truthy()) {
        kept.push_back(item);
      }
      if (context_.failed()) {
        return;
      }
    }
    built = std::move(kept);
    listed = &built;
  }
  const List& items = *listed;
  bool iterated = false;
  int unrecorded_run = 0;  // iterations in a row evaluated and not recorded
  const auto count = static_cast<std::int64_t>(items.size());
  // One `loop` object per loop, updated in place each iteration (its keys
  // are allocated once; templates read it, they do not keep it).
  // Copied from a prototype: an initializer list would construct each key
  // from its literal and then copy every pair once more.
  static const Mapping kLoopFields = {{"index", Value()},     {"index0", Value()},   {"revindex", Value()},
                                      {"revindex0", Value()}, {"first", Value()},    {"last", Value()},
                                      {"length", Value()},    {"previtem", Value()}, {"nextitem", Value()}};
  auto loop = std::make_shared<Namespace>();
  loop->entries = kLoopFields;
  loop->entries[6].second = Value(count);
  loop_scope.set("loop", Value(loop));
  if (recording_ != nullptr) {
    recording_->created.push_back(loop.get());  // a loop inside a recorded iteration: its own state
  }
  for (std::int64_t index = 0; index < count && !context_.failed(); ++index) {
    auto at = static_cast<std::size_t>(index);
    Mapping& fields = loop->entries;
    fields[0].second = Value(index + 1);
    fields[1].second = Value(index);
    fields[2].second = Value(count - index);
    fields[3].second = Value(count - index - 1);
    fields[4].second = Value(index == 0);
    fields[5].second = Value(index == count - 1);
    fields[7].second = index > 0 ? items[at - 1] : Value();
    fields[8].second = index + 1 < count ? items[at + 1] : Value();
    assign(target, items[at], loop_scope);
    auto flow = iterate(node, items[at], loop_scope, out, unrecorded_run);
    if (flow == RenderContext::Flow::kBreak) {
      break;
    }
    if (flow == RenderContext::Flow::kContinue) {
      continue;
    }
    iterated = true;
  }
  if (!iterated) {
    render_block(node.alternate, loop_scope, out);
  }
}

void Interpreter::set_variable(Scope& scope, const std::string& name, Value value) {
  if (recording_ != nullptr && &scope == recording_->loop_scope) {
    auto& written = recording_->written;
    if (std::find(written.begin(), written.end(), name) == written.end()) {
      written.emplace_back(name);
    }
  }
  scope.set(name, std::move(value));
}

void Interpreter::assign(const Node& target, const Value& value, Scope& scope) {
  if (target.kind == NodeKind::kIdentifier) {
    set_variable(scope, target.name, value);
  } else if (target.kind == NodeKind::kTuple) {
    if (!value.is(Value::Kind::kList)) {
      context_.fail("cannot unpack non-iterable type: " + std::string(value.type_name()));
      return;
    }
    const List& items = value.as_list();
    if (items.size() != target.operands.size()) {
      context_.fail(items.size() < target.operands.size() ? "too few items to unpack" : "too many items to unpack");
      return;
    }
    for (std::size_t index = 0; index < items.size(); ++index) {
      assign(*target.operands[index], items[index], scope);
    }
  } else if (target.kind == NodeKind::kMember && !target.flag) {
    const Node& object_node = *target.operands[0];
    Value object;
    bool external = false;
    if (recording_ != nullptr && object_node.kind == NodeKind::kIdentifier) {
      const Value* found = resolve(object_node.name, scope, external);
      object = found ? *found : Value();
    } else {
      object = evaluate(object_node, scope);
    }
    if (!object.is(Value::Kind::kNamespace)) {
      context_.fail("cannot assign attribute on non-namespace object");
      return;
    }
    if (holds_namespace(value, &object.as_namespace())) {
      // Namespaces are shared by reference: one inside itself is a cycle
      // that neither tojson nor its owner could ever finish with.
      context_.fail("cannot assign a namespace into itself");
      return;
    }
    Mapping& entries = object.as_namespace().entries;
    const std::string& name = target.operands[1]->name;
    if (recording_ != nullptr) {
      Recording& recording = *recording_;
      const Namespace* space = &object.as_namespace();
      bool made_here = std::find(recording.created.begin(), recording.created.end(), space) != recording.created.end();
      if (!made_here) {
        if (object_node.kind != NodeKind::kIdentifier || !external) {
          abandon_recording();  // a namespace from before the iteration reached some other way
        } else if (note_namespace(object_node.name, space)) {
          recording.written_attributes.emplace_back(space, name);
          recording.record.effects.push_back(Effect{object_node.name, name, value});
        }
      }
    }
    auto existing =
        std::find_if(entries.begin(), entries.end(), [&](const auto& entry) { return entry.first == name; });
    if (existing != entries.end()) {
      existing->second = value;
    } else {
      entries.emplace_back(name, value);
    }
  } else {
    context_.fail("invalid assignment target");
  }
}

Value Interpreter::define_macro(const Node& node) {
  const Node* macro = &node;
  return Value(Function([macro](Arguments& arguments, RenderContext& context) -> Value {
    ++context.macro_calls;
    if (context.depth >= kMaxCallDepth) {
      return context.fail("macro recursion too deep");
    }
    Scope scope(context.caller);
    std::vector<const Node*> defaults;
    for (std::size_t index = 0; index < macro->operands.size(); ++index) {
      const Node& parameter = *macro->operands[index];
      const Value* given = arguments.get(index, parameter.name);
      if (given == nullptr && parameter.kind == NodeKind::kKeywordArgument) {
        defaults.push_back(&parameter);
      }
      scope.set(parameter.name, given ? *given : Value());
    }
    if (arguments.positional.size() > macro->operands.size()) {
      return context.fail("macro '" + macro->name + "' takes not more than " + std::to_string(macro->operands.size()) +
                          " argument(s)");
    }
    ++context.depth;
    Interpreter interpreter(context);
    for (const Node* parameter : defaults) {
      scope.set(parameter->name, interpreter.evaluate(*parameter->operands[0], scope));
    }
    std::string out;
    interpreter.render_block(macro->body, scope, out);
    --context.depth;
    context.flow = RenderContext::Flow::kNormal;
    return Value(std::move(out));
  }));
}

Arguments Interpreter::evaluate_arguments(const NodeList& operands, std::size_t first, Scope& scope) {
  Arguments arguments;
  for (std::size_t index = first; index < operands.size(); ++index) {
    const Node& argument = *operands[index];
    if (argument.kind == NodeKind::kKeywordArgument) {
      arguments.keywords.emplace_back(argument.name, evaluate(*argument.operands[0], scope));
    } else {
      arguments.positional.push_back(evaluate(argument, scope));
    }
  }
  return arguments;
}

Value Interpreter::evaluate(const Node& node, Scope& scope) {
  if (context_.failed()) {
    return {};
  }
  if (++context_.steps > context_.step_limit && context_.step_limit != 0) {
    return context_.fail("the chat template took more than " + std::to_string(context_.step_limit) + " steps");
  }
  switch (node.kind) {
    case NodeKind::kLiteral:
      return node.literal;
    case NodeKind::kIdentifier: {
      if (recording_ != nullptr) {
        return read_variable(node.name, scope);
      }
      const Value* found = scope.lookup(node.name);
      return found ? *found : Value();
    }
    case NodeKind::kList:
    case NodeKind::kTuple: {
      List items;
      for (const auto& item : node.operands) {
        items.push_back(evaluate(*item, scope));
      }
      return Value(std::move(items));
    }
    case NodeKind::kObject: {
      Mapping entries;
      for (std::size_t index = 0; index + 1 < node.operands.size(); index += 2) {
        Value key = evaluate(*node.operands[index], scope);
        if (!key.is_string()) {
          return context_.fail("object keys must be strings: got " + std::string(key.type_name()));
        }
        Value value = evaluate(*node.operands[index + 1], scope);
        auto existing = std::find_if(entries.begin(), entries.end(),
                                     [&](const auto& entry) { return entry.first == key.as_string(); });
        if (existing != entries.end()) {
          existing->second = std::move(value);
        } else {
          entries.emplace_back(key.as_string(), std::move(value));
        }
      }
      return Value(std::move(entries));
    }
    case NodeKind::kMember:
      return evaluate_member(node, scope);
    case NodeKind::kCall:
      return evaluate_call(node, scope);
    case NodeKind::kUnary: {
      Value operand = evaluate(*node.operands[0], scope);
      if (node.name == "not") {
        return Value(!operand.truthy());
      }
      double sign = node.name == "-" ? -1 : 1;
      if (operand.is(Value::Kind::kFloat)) {
        return Value(sign * operand.as_float());
      }
      if (operand.is(Value::Kind::kInteger)) {
        return Value(static_cast<std::int64_t>(sign) * operand.as_integer());
      }
      if (operand.is(Value::Kind::kBool)) {
        return Value(static_cast<std::int64_t>(sign) * (operand.as_bool() ? 1 : 0));
      }
      return context_.fail("unknown operator \"" + node.name + "\" for " + std::string(operand.type_name()));
    }
    case NodeKind::kBinary:
      return evaluate_binary(node, scope);
    case NodeKind::kFilter:
      return evaluate_filter(node, scope);
    case NodeKind::kTest: {
      Value result = run_test(node.name, evaluate(*node.operands[0], scope), context_);
      if (context_.failed()) {
        return {};
      }
      return Value(node.flag ? !result.as_bool() : result.as_bool());
    }
    case NodeKind::kSelect:
      return evaluate(*node.operands[1], scope).truthy() ? evaluate(*node.operands[0], scope) : Value();
    case NodeKind::kTernary:
      return evaluate(*node.operands[0], scope).truthy() ? evaluate(*node.operands[1], scope)
                                                         : evaluate(*node.operands[2], scope);
    default: {
      std::string out;
      render_statement(node, scope, out);
      return {};
    }
  }
}

Value Interpreter::evaluate_binary(const Node& node, Scope& scope) {
  Value left = evaluate(*node.operands[0], scope);
  if (node.op == Operator::kAnd) {
    return left.truthy() ? evaluate(*node.operands[1], scope) : left;
  }
  if (node.op == Operator::kOr) {
    return left.truthy() ? left : evaluate(*node.operands[1], scope);
  }
  Value right = evaluate(*node.operands[1], scope);
  if (context_.failed()) {
    return {};
  }
  return binary_operation(node.op, node.name, left, right, context_);
}

Value Interpreter::evaluate_member(const Node& node, Scope& scope) {
  const Node& property_node = *node.operands[1];
  if (recording_ != nullptr && node.operands[0]->kind == NodeKind::kIdentifier) {
    const std::string* attribute = nullptr;
    if (!node.flag && property_node.kind == NodeKind::kIdentifier) {
      attribute = &property_node.name;
    } else if (node.flag && property_node.kind == NodeKind::kLiteral && property_node.literal.is_string()) {
      attribute = &property_node.literal.as_string();
    }
    // The ordinary path evaluates the object's name and, for `m['key']`,
    // the key: steps the shortcut takes too, so that a recorded iteration
    // counts what the full render counts. At the limit, the ordinary path
    // fails as the full render does.
    const std::uint64_t skipped_steps = node.flag ? 2 : 1;
    Value result;
    if (attribute != nullptr && (context_.step_limit == 0 || context_.steps + skipped_steps <= context_.step_limit) &&
        read_attribute(*node.operands[0], *attribute, scope, result)) {
      context_.steps += skipped_steps;
      return result;
    }
  }
  Value object = evaluate(*node.operands[0], scope);
  if (recording_ != nullptr && object.is(Value::Kind::kNamespace)) {
    const auto& created = recording_->created;
    if (std::find(created.begin(), created.end(), &object.as_namespace()) == created.end()) {
      abandon_recording();  // a namespace's attribute reached other than by its name
    }
  }
  if (property_node.kind == NodeKind::kSlice) {
    auto bound = [&](std::size_t index) -> std::optional<Value> {
      if (!property_node.operands[index]) {
        return std::nullopt;
      }
      return evaluate(*property_node.operands[index], scope);
    };
    std::optional<Value> start = bound(0);
    std::optional<Value> stop = bound(1);
    std::optional<Value> step = bound(2);
    for (const auto* part : {&start, &stop, &step}) {
      if (part->has_value() && !(*part)->is(Value::Kind::kInteger) && !(*part)->is_undefined()) {
        return context_.fail("slice indices must be integers");
      }
    }
    auto pointer = [](const std::optional<Value>& value) {
      return value && !value->is_undefined() ? &*value : nullptr;
    };
    if (object.is(Value::Kind::kList)) {
      List result;
      for (auto index : slice_indices(object.as_list().size(), pointer(start), pointer(stop), pointer(step))) {
        result.push_back(object.as_list()[index]);
      }
      return Value(std::move(result));
    }
    if (object.is_string()) {
      auto points = code_points(object.as_string());
      std::string result;
      for (auto index : slice_indices(points.size(), pointer(start), pointer(stop), pointer(step))) {
        result += points[index];
      }
      return Value(std::move(result));
    }
    return context_.fail("slice object must be an array or string");
  }
  if (!node.flag && property_node.kind == NodeKind::kIdentifier) {  // object.name: no Value for the name
    const std::string& name = property_node.name;
    if (object.is(Value::Kind::kMapping) || object.is(Value::Kind::kNamespace)) {
      if (const Value* found = object.find(name)) {
        return *found;
      }
      return object.is(Value::Kind::kMapping) ? member_of(object, name) : Value();
    }
    return member_of(object, name);
  }
  Value property = evaluate(property_node, scope);
  if (context_.failed()) {
    return {};
  }
  if (object.is(Value::Kind::kMapping) || object.is(Value::Kind::kNamespace)) {
    if (!property.is_string()) {
      return context_.fail("cannot access property with non-string: got " + std::string(property.type_name()));
    }
    if (const Value* found = object.find(property.as_string())) {
      return *found;
    }
    return object.is(Value::Kind::kMapping) ? member_of(object, property.as_string()) : Value();
  }
  if (object.is(Value::Kind::kList) || object.is_string()) {
    if (property.is(Value::Kind::kInteger)) {
      std::int64_t index = property.as_integer();
      if (object.is(Value::Kind::kList)) {
        auto size = static_cast<std::int64_t>(object.as_list().size());
        if (index < 0) {
          index += size;
        }
        return index >= 0 && index < size ? object.as_list()[static_cast<std::size_t>(index)] : Value();
      }
      auto points = code_points(object.as_string());
      auto size = static_cast<std::int64_t>(points.size());
      if (index < 0) {
        index += size;
      }
      return index >= 0 && index < size ? Value(points[static_cast<std::size_t>(index)]) : Value();
    }
    if (property.is_string()) {
      return member_of(object, property.as_string());
    }
    return context_.fail("cannot access property with non-string/non-number: got " + std::string(property.type_name()));
  }
  return property.is_string() ? member_of(object, property.as_string()) : Value();
}

Value Interpreter::evaluate_call(const Node& node, Scope& scope) {
  Arguments arguments = evaluate_arguments(node.operands, 1, scope);
  const Node& callee_node = *node.operands[0];
  if (callee_node.kind == NodeKind::kMember && !callee_node.flag &&
      callee_node.operands[1]->kind == NodeKind::kIdentifier) {
    Value object = evaluate(*callee_node.operands[0], scope);
    if (context_.failed()) {
      return {};
    }
    Value result;
    if (call_method(object, callee_node.operands[1]->name, arguments, context_, result)) {
      return result;
    }
  }
  Value callee = evaluate(callee_node, scope);
  if (context_.failed()) {
    return {};
  }
  if (!callee.is(Value::Kind::kFunction)) {
    return context_.fail("cannot call something that is not a function: got " + std::string(callee.type_name()));
  }
  Scope* previous = context_.caller;
  context_.caller = &scope;
  Value result = callee.as_function()(arguments, context_);
  context_.caller = previous;
  if (recording_ != nullptr && result.is(Value::Kind::kNamespace)) {
    recording_->created.push_back(&result.as_namespace());  // namespace(): a new object
  }
  return result;
}

Value Interpreter::evaluate_filter(const Node& node, Scope& scope) {
  Value operand = evaluate(*node.operands[0], scope);
  const Node& filter = *node.operands[1];
  Arguments arguments;
  const std::string* name = &filter.name;
  if (filter.kind == NodeKind::kCall) {
    if (filter.operands[0]->kind != NodeKind::kIdentifier) {
      return context_.fail("unknown filter");
    }
    name = &filter.operands[0]->name;
    arguments = evaluate_arguments(filter.operands, 1, scope);
  }
  if (context_.failed()) {
    return {};
  }
  return apply_filter(*name, operand, arguments, context_);
}

// --- Incremental rendering (memo.hpp) ---

namespace {

// Namespaces and functions are per render (macros) or mutable: a record whose
// effects hold one could not be replayed into another render.
bool holds_mutable(const Value& value) {
  switch (value.kind()) {
    case Value::Kind::kNamespace:
    case Value::Kind::kFunction:
      return true;
    case Value::Kind::kList:
      return std::any_of(value.as_list().begin(), value.as_list().end(), holds_mutable);
    case Value::Kind::kMapping:
      return std::any_of(value.as_mapping().begin(), value.as_mapping().end(),
                         [](const auto& entry) { return holds_mutable(entry.second); });
    default:
      return false;
  }
}

// An iteration that reads a long list whole (Qwen3's `messages|length` in
// its backwards scan) depends on the conversation, not on its item: such
// records would never validate, and would crowd out the ones that do.
constexpr std::size_t kMaxDependencyItems = 16;

bool too_large_to_depend_on(const Value& value) {
  return (value.is(Value::Kind::kList) && value.as_list().size() > kMaxDependencyItems) ||
         (value.is(Value::Kind::kMapping) && value.as_mapping().size() > kMaxDependencyItems);
}

}  // namespace

RenderContext::Flow Interpreter::iterate(const Node& loop, const Value& item, Scope& loop_scope, std::string& out,
                                         int& unrecorded_run) {
  auto take_flow = [this] {
    auto flow = context_.flow;
    context_.flow = RenderContext::Flow::kNormal;
    return flow;
  };
  IterationMemo* memo = context_.memo;
  // A loop whose iterations keep failing to record (Qwen3's backwards scan
  // reads the whole list) is not looked up for the rest of this render.
  constexpr int kGiveUpAfter = 8;
  if (memo == nullptr || recording_ != nullptr || unrecorded_run >= kGiveUpAfter) {
    if (memo != nullptr && recording_ == nullptr) {
      ++memo->evaluated;
    }
    render_block(loop.body, loop_scope, out);
    return take_flow();
  }
  if (text_bytes(item, memo->min_output_bytes()) < memo->min_output_bytes() &&
      !memo->records_small_items(context_.program.get(), &loop)) {
    // Evaluated without recording; its size says whether this loop's small
    // iterations would be kept after all.
    ++memo->evaluated;
    auto start = out.size();
    auto steps = context_.steps;
    render_block(loop.body, loop_scope, out);
    if (!context_.failed() && memo->worth_keeping(out.size() - start, context_.steps - steps)) {
      memo->note_small_items_pay(context_.program.get(), &loop);
    }
    return take_flow();
  }
  IterationMemo::Key key{context_.program.get(), &loop, fingerprint(item)};
  if (const IterationRecord* record = memo->find(key); record != nullptr && replay(*record, loop_scope, out)) {
    ++memo->replayed;
    unrecorded_run = 0;
    return record->flow == IterationFlow::kContinue ? RenderContext::Flow::kContinue : RenderContext::Flow::kNormal;
  }
  ++memo->evaluated;
  ++unrecorded_run;
  Recording recording;
  recording.loop_scope = &loop_scope;
  auto start = out.size();
  auto steps = context_.steps;
  auto macro_calls = context_.macro_calls;
  auto clock_reads = context_.clock_reads;
  recording_ = &recording;
  render_block(loop.body, loop_scope, out);
  recording_ = nullptr;
  auto flow = take_flow();
  if (context_.failed() || flow == RenderContext::Flow::kBreak || !recording.recordable ||
      context_.macro_calls != macro_calls || context_.clock_reads != clock_reads ||
      !memo->worth_keeping(out.size() - start, context_.steps - steps)) {
    return flow;
  }
  for (std::string_view name : recording.written) {
    const Value* value = loop_scope.find_here(name);
    recording.record.effects.push_back(Effect{name, {}, value ? *value : Value()});
  }
  for (const auto& effect : recording.record.effects) {
    if (holds_mutable(effect.value)) {
      return flow;
    }
  }
  recording.record.output.assign(out, start);
  recording.record.steps = context_.steps - steps;
  recording.record.flow = flow == RenderContext::Flow::kContinue ? IterationFlow::kContinue : IterationFlow::kNormal;
  memo->store(key, context_.program, std::move(recording.record));
  unrecorded_run = 0;
  return flow;
}

void Interpreter::abandon_recording() {
  // The iteration will not be stored: the rest of it runs untracked (a loop
  // inside it may record iterations of its own).
  recording_->recordable = false;
  recording_ = nullptr;
}

bool Interpreter::still_holds(const IterationRecord& record, Scope& loop_scope) {
  const auto steps = context_.steps;
  // A test evaluated again may take a path it did not take when recorded
  // (a macro call whose body loops): nothing may be stored meanwhile, or the
  // record being checked could be evicted under us.
  IterationMemo* memo = std::exchange(context_.memo, nullptr);
  std::vector<const Namespace*> namespaces;
  bool holds = true;
  for (const Dependency& dependency : record.dependencies) {
    switch (dependency.kind) {
      case Dependency::Kind::kVariable: {
        const Value* found = loop_scope.lookup(dependency.name);
        holds = matches_encoded(found ? *found : Value(), dependency.encoded, record.output);
        break;
      }
      case Dependency::Kind::kMember:
      case Dependency::Kind::kAttribute: {
        // A mapping's key or a namespace's attribute, each read only from
        // its own kind.
        auto kind = dependency.kind == Dependency::Kind::kMember ? Value::Kind::kMapping : Value::Kind::kNamespace;
        const Value* found = loop_scope.lookup(dependency.name);
        holds = found != nullptr && found->is(kind);
        if (holds) {
          const Value* entry = found->find(dependency.attribute);
          holds = matches_encoded(entry ? *entry : Value(), dependency.encoded, record.output);
        }
        break;
      }
      case Dependency::Kind::kNamespace: {
        const Value* found = loop_scope.lookup(dependency.name);
        holds = found != nullptr && found->is(Value::Kind::kNamespace);
        if (holds) {
          const Namespace* space = &found->as_namespace();
          // The same names must share objects as they did when recorded.
          auto first = std::find(namespaces.begin(), namespaces.end(), space);
          holds = static_cast<std::size_t>(first - namespaces.begin()) == dependency.alias;
          namespaces.push_back(space);
        }
        break;
      }
      case Dependency::Kind::kTest: {
        Value outcome = evaluate(*dependency.test, loop_scope);
        if (context_.failed()) {  // it did not fail when recorded: no longer the same state
          context_.error.clear();
          holds = false;
        } else {
          holds = outcome.truthy() == dependency.value.as_bool();
        }
        break;
      }
    }
    if (!holds) {
      break;
    }
  }
  context_.steps = steps;
  context_.memo = memo;
  return holds;
}

bool Interpreter::replay(const IterationRecord& record, Scope& loop_scope, std::string& out) {
  // A replay that would cross a limit is evaluated instead, so that the
  // limit's error is the one the full render gives.
  if ((context_.step_limit != 0 && context_.steps + record.steps > context_.step_limit) ||
      (context_.output_limit != 0 && out.size() + record.output.size() > context_.output_limit)) {
    return false;
  }
  if (!still_holds(record, loop_scope)) {
    return false;
  }
  out += record.output;
  context_.steps += record.steps;
  for (const Effect& effect : record.effects) {
    if (effect.attribute.empty()) {
      loop_scope.set(effect.name, effect.value);
      continue;
    }
    // still_holds checked that the name is a namespace (kNamespace).
    Mapping& entries = loop_scope.lookup(effect.name)->as_namespace().entries;
    auto existing = std::find_if(entries.begin(), entries.end(),
                                 [&](const auto& entry) { return entry.first == effect.attribute; });
    if (existing != entries.end()) {
      existing->second = effect.value;
    } else {
      entries.emplace_back(effect.attribute, effect.value);
    }
  }
  return true;
}

const Value* Interpreter::resolve(std::string_view name, const Scope& scope, bool& external) {
  const Recording& recording = *recording_;
  bool passed = false;  // the walk reached the loop's scope
  for (const Scope* at = &scope; at != nullptr; at = at->parent()) {
    passed = passed || at == recording.loop_scope;
    if (const Value* found = at->find_here(name)) {
      external = passed && !(at == recording.loop_scope && std::find(recording.written.begin(), recording.written.end(),
                                                                     name) != recording.written.end());
      return found;
    }
  }
  external = true;  // undefined everywhere, the loop's scope and above included
  if (!passed) {
    abandon_recording();  // a scope chain that bypasses the loop: not tracked
  }
  return nullptr;
}

void Interpreter::add_dependency(Dependency dependency) {
  auto& dependencies = recording_->record.dependencies;
  for (const Dependency& known : dependencies) {
    if (known.kind == dependency.kind && known.name == dependency.name && known.attribute == dependency.attribute) {
      return;
    }
  }
  bool large = too_large_to_depend_on(dependency.value);
  dependencies.push_back(std::move(dependency));
  if (large) {
    if (recording_->test_depth > 0) {
      recording_->large_in_test = true;  // the test's outcome may stand in for it
    } else {
      abandon_recording();
    }
  }
}

Value Interpreter::read_variable(const std::string& name, const Scope& scope) {
  bool external = false;
  const Value* found = resolve(name, scope, external);
  Value value = found ? *found : Value();
  if (!external) {
    ++recording_->internal_reads;
    return value;
  }
  Dependency dependency;
  dependency.name = name;
  dependency.value = value;
  add_dependency(std::move(dependency));
  return value;
}

bool Interpreter::note_namespace(std::string_view name, const Namespace* space) {
  Recording& recording = *recording_;
  auto object_of = [&](std::string_view known_name) {
    return std::find_if(recording.namespaces.begin(), recording.namespaces.end(),
                        [&](const auto& entry) { return entry.first == known_name; });
  };
  auto known = object_of(name);
  if (known != recording.namespaces.end() && known->second != space) {
    abandon_recording();
    return false;
  }
  if (known == recording.namespaces.end()) {
    recording.namespaces.emplace_back(name, space);
  }
  // A test's dependencies are replaced by its outcome, so a name may need
  // listing again; an alias is a position among the listed names.
  std::vector<const Namespace*> listed;
  for (const Dependency& dependency : recording.record.dependencies) {
    if (dependency.kind != Dependency::Kind::kNamespace) {
      continue;
    }
    if (dependency.name == name) {
      return true;
    }
    listed.push_back(object_of(dependency.name)->second);
  }
  Dependency dependency;
  dependency.kind = Dependency::Kind::kNamespace;
  dependency.name = name;
  dependency.alias = static_cast<std::uint32_t>(std::find(listed.begin(), listed.end(), space) - listed.begin());
  recording.record.dependencies.push_back(std::move(dependency));
  return true;
}

bool Interpreter::read_attribute(const Node& object_node, std::string_view attribute, const Scope& scope,
                                 Value& result) {
  bool external = false;
  const Value* found = resolve(object_node.name, scope, external);
  if (found != nullptr && found->is(Value::Kind::kMapping) && external) {
    const Value* member = found->find(attribute);
    if (member == nullptr && !member_of(*found, std::string(attribute)).is_undefined()) {
      return false;  // a method (items, get, ...): the ordinary path reads the whole mapping
    }
    result = member ? *member : Value();
    add_dependency(Dependency{Dependency::Kind::kMember, object_node.name, attribute, nullptr, 0, result, {}});
    return true;
  }
  if (found == nullptr || !found->is(Value::Kind::kNamespace)) {
    return false;  // the ordinary path reads it
  }
  Recording& recording = *recording_;
  const Namespace* space = &found->as_namespace();
  const Value* value = found->find(attribute);
  result = value ? *value : Value();
  if (std::find(recording.created.begin(), recording.created.end(), space) != recording.created.end()) {
    ++recording.internal_reads;
    return true;
  }
  if (!external) {  // a namespace from before the iteration under a name the iteration set
    abandon_recording();
    return true;
  }
  // Noted even when the attribute was written here: which names share a
  // namespace decides what the write changed for this read.
  if (!note_namespace(object_node.name, space)) {
    return true;
  }
  if (std::find(recording.written_attributes.begin(), recording.written_attributes.end(),
                std::make_pair(space, attribute)) != recording.written_attributes.end()) {
    ++recording.internal_reads;
    return true;
  }
  add_dependency(Dependency{Dependency::Kind::kAttribute, object_node.name, attribute, nullptr, 0, result, {}});
  return true;
}

}  // namespace kvgate::chat_template
