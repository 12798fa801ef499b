#include "request_body.hpp"

namespace kvgate::load {

using nlohmann::json;

namespace {

// A streamed request that asks for its usage (the engine's cached-token
// figure) with the run's extra fields; `input_key` names the workload's
// input ("messages" or "prompt").
std::string streamed_body(const std::string& model, const char* input_key, json input, std::uint32_t max_tokens,
                          const json& extra) {
  json body = {{"model", model},
               {input_key, std::move(input)},
               {"max_tokens", max_tokens},
               {"stream", true},
               {"stream_options", {{"include_usage", true}}}};
  if (extra.is_object()) {
    for (const auto& [key, value] : extra.items()) {
      body[key] = value;
    }
  }
  // The answers go back into the history; an engine that split a
  // character between events must not make the next turn unsendable.
  return body.dump(-1, ' ', false, json::error_handler_t::replace);
}

}  // namespace

std::string chat_body(const std::string& model, const json& messages, std::uint32_t max_tokens, const json& extra) {
  return streamed_body(model, "messages", messages, max_tokens, extra);
}

std::string completion_body(const std::string& model, const std::string& prompt, std::uint32_t max_tokens,
                            const json& extra) {
  return streamed_body(model, "prompt", prompt, max_tokens, extra);
}

}  // namespace kvgate::load
