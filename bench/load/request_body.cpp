#include "request_body.hpp"

namespace kvgate::load {

using nlohmann::json;

namespace {

std::string with_fields(json body, const json& extra) {
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
  return with_fields({{"model", model},
                      {"messages", messages},
                      {"max_tokens", max_tokens},
                      {"stream", true},
                      {"stream_options", {{"include_usage", true}}}},
                     extra);
}

std::string completion_body(const std::string& model, const std::string& prompt, std::uint32_t max_tokens,
                            const json& extra) {
  return with_fields({{"model", model},
                      {"prompt", prompt},
                      {"max_tokens", max_tokens},
                      {"stream", true},
                      {"stream_options", {{"include_usage", true}}}},
                     extra);
}

}  // namespace kvgate::load
