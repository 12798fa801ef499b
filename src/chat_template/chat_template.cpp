#include "kvgate/chat_template/chat_template.hpp"

#include "ast.hpp"
#include "interpreter.hpp"
#include "lexer.hpp"
#include "memo.hpp"
#include "parser.hpp"

namespace kvgate::chat_template {

struct ChatTemplate::Program {
  NodeList body;
  // The built-in names (true, namespace, range, ...), built once: their
  // functions keep no state, so every render and thread shares them.
  Scope builtins;
};

namespace {

constexpr std::size_t kTemplateTextAllowance = 4096;
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

RenderCache::RenderCache(std::size_t capacity_bytes, std::size_t min_output_bytes, std::uint64_t min_steps)
    : memo_(std::make_unique<IterationMemo>(capacity_bytes, min_output_bytes, min_steps)) {}
RenderCache::~RenderCache() = default;
std::size_t RenderCache::bytes() const {
  return memo_->bytes();
}
std::uint64_t RenderCache::replayed_iterations() const {
  return memo_->replayed;
}
std::uint64_t RenderCache::evaluated_iterations() const {
  return memo_->evaluated;
}

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
  if (input.cache != nullptr) {
    context.memo = input.cache->memo_.get();
    context.program = program_;
  }
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
  // Prompts are mostly the messages' text: one allocation instead of a
  // doubling series of copies of a long prompt.
  out.reserve(text_bytes(input.messages) + kTemplateTextAllowance);
  Interpreter(context).render_block(program_->body, scope, out);
  if (context.failed()) {
    return unexpected(std::move(context.error));
  }
  return out;
}

}  // namespace kvgate::chat_template
