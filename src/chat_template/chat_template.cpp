#include "kvgate/chat_template/chat_template.hpp"

#include "ast.hpp"
#include "interpreter.hpp"
#include "lexer.hpp"
#include "parser.hpp"

namespace kvgate::chat_template {

struct ChatTemplate::Program {
  NodeList body;
  // The built-in names (true, namespace, range, ...), built once: their
  // functions keep no state, so every render and thread shares them.
  Scope builtins;
};

namespace {

bool mentions_content(const Node& node) {
  if (node.kind == NodeKind::kMember) {
    const Node& property = *node.operands[1];
    if ((property.kind == NodeKind::kIdentifier && property.name == "content") ||
        (property.kind == NodeKind::kLiteral && property.literal.is_string() &&
         property.literal.as_string() == "content")) {
      return true;
    }
  }
  return false;
}

// vLLM's detection: a `for` whose iterable is some message's `content`.
bool loops_over_content(const NodeList& nodes) {
  for (const auto& node : nodes) {
    if (!node) {
      continue;
    }
    if (node->kind == NodeKind::kFor && node->operands.size() >= 2 && mentions_content(*node->operands[1])) {
      return true;
    }
    if (loops_over_content(node->body) || loops_over_content(node->alternate)) {
      return true;
    }
  }
  return false;
}

}  // namespace

Result<ChatTemplate, std::string> ChatTemplate::compile(std::string_view source) {
  auto tokens = tokenize_template(source);
  if (!tokens) {
    return unexpected("chat template: " + tokens.error());
  }
  auto body = parse_template(*tokens);
  if (!body) {
    return unexpected("chat template: " + body.error());
  }
  auto program = std::make_shared<Program>();
  program->body = std::move(*body);
  add_globals(program->builtins);
  bool iterates = loops_over_content(program->body);
  return ChatTemplate(std::move(program), iterates);
}

Result<std::string, std::string> ChatTemplate::render(const RenderInput& input) const {
  RenderContext context;
  context.now = input.now;
  context.output_limit = input.output_limit;
  context.step_limit = input.step_limit;
  Scope globals(&program_->builtins);
  globals.set("messages", input.messages);
  if (!input.tools.is_undefined()) {
    globals.set("tools", input.tools);
  }
  globals.set("add_generation_prompt", Value(input.add_generation_prompt));
  globals.set("bos_token", input.bos_token);
  globals.set("eos_token", input.eos_token);
  for (const auto& [name, value] : input.extra) {
    globals.set(name, value);
  }
  Scope scope(&globals);
  std::string out;
  Interpreter(context).render_block(program_->body, scope, out);
  if (context.failed()) {
    return unexpected(std::move(context.error));
  }
  return out;
}

}  // namespace kvgate::chat_template
