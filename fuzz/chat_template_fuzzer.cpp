// Arbitrary bytes as a chat template: it compiles or reports why, and a
// compiled one renders or reports why, within its output and step limits;
// it never crashes or hangs.
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
  return 0;
}
