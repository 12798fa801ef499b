// Arbitrary bytes as a chat template: it compiles or reports why, and a
// compiled one renders or reports why, within its output and step limits;
// it never crashes or hangs. Incremental rendering must agree with the full
// render: the same input rendered again with a cache (its iterations
// replayed), and the conversation's next turn, give what the full render
// gives, output or error.
#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "kvgate/chat_template/chat_template.hpp"
#include "kvgate/prompt/chat_request.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string source(reinterpret_cast<const char*>(data), size);
  auto compiled = kvgate::chat_template::ChatTemplate::compile(source);
  if (!compiled) {
    if (compiled.error().empty()) __builtin_trap();
    return 0;
  }
  static const auto body = nlohmann::ordered_json::parse(R"({"messages": [
    {"role": "system", "content": "Be brief."},
    {"role": "user", "content": [{"type": "text", "text": "Weather?"}]},
    {"role": "assistant", "content": null, "tool_calls": [{"id": "1", "type": "function",
      "function": {"name": "get_weather", "arguments": "{\"city\": \"Bern\"}"}}]},
    {"role": "tool", "tool_call_id": "1", "content": "sunny"}],
    "tools": [{"type": "function", "function": {"name": "get_weather", "parameters": {}}}],
    "chat_template_kwargs": {"enable_thinking": false}})");
  auto input = kvgate::prompt::render_input_from_request(body, *compiled, {});
  if (!input) __builtin_trap();
  input->output_limit = 1 << 20;
  input->step_limit = 200'000;
  auto rendered = compiled->render(*input);
  if (!rendered && rendered.error().empty()) __builtin_trap();

  // One cache for the whole run: entries of earlier templates stay in it.
  // Every iteration kept, however short, so that every replay is checked;
  // small, so that evictions happen during renders too.
  static kvgate::chat_template::RenderCache cache(64u << 10, 0, 0);
  auto same = [](const auto& a, const auto& b) {
    return a.has_value() == b.has_value() && (a ? *a == *b : a.error() == b.error());
  };
  auto cached_input = *input;
  cached_input.cache = &cache;
  for (int pass = 0; pass < 2; ++pass) {
    if (!same(compiled->render(cached_input), rendered)) __builtin_trap();
  }
  static const auto next_turn = [] {
    auto next = body;
    next["messages"].push_back({{"role", "assistant"}, {"content", "It is sunny in Bern."}});
    next["messages"].push_back({{"role", "user"}, {"content", "And tomorrow?"}});
    return next;
  }();
  auto next_input = kvgate::prompt::render_input_from_request(next_turn, *compiled, {});
  if (!next_input) __builtin_trap();
  next_input->output_limit = input->output_limit;
  next_input->step_limit = input->step_limit;
  auto next_full = compiled->render(*next_input);
  next_input->cache = &cache;
  if (!same(compiled->render(*next_input), next_full)) __builtin_trap();
  return 0;
}
