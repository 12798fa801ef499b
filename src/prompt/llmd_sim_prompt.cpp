#include "kvgate/prompt/llmd_sim_prompt.hpp"

#include <nlohmann/json.hpp>

#include "kvgate/tokenizer/llmd_sim.hpp"

namespace kvgate::prompt {
namespace {

using Json = nlohmann::ordered_json;

// A member's string value; "" when absent or not a string (Go's zero value).
std::string_view string_member(const Json& object, const char* name) {
  if (!object.is_object()) {
    return {};
  }
  auto found = object.find(name);
  if (found == object.end() || !found->is_string()) {
    return {};
  }
  return found->get_ref<const std::string&>();
}

void append_content(const Json& message, std::string& out) {
  auto content = message.find("content");
  if (content == message.end()) {
    return;
  }
  if (content->is_string()) {
    out += content->get_ref<const std::string&>();
    return;
  }
  if (!content->is_array()) {
    return;
  }
  bool first = true;
  for (const auto& part : *content) {
    const auto type = string_member(part, "type");
    std::string piece;
    if (type == "text") {
      piece = string_member(part, "text");
    } else if (type == "image_url") {
      auto image = part.find("image_url");
      if (image == part.end() || !image->is_object()) {
        continue;
      }
      piece = "image: ";
      piece += string_member(*image, "url");
    } else {
      continue;
    }
    if (!first) {
      out += '\n';
    }
    out += piece;
    first = false;
  }
}

void append_tool_calls(const Json& message, std::string& out) {
  auto calls = message.find("tool_calls");
  if (calls == message.end() || !calls->is_array()) {
    return;
  }
  for (const auto& call : *calls) {
    if (!call.is_object()) {
      continue;
    }
    auto function = call.find("function");
    if (function == call.end() || !function->is_object()) {
      continue;
    }
    auto name = function->find("name");
    if (name == function->end() || !name->is_string()) {
      continue;  // the simulator renders only calls with a name
    }
    out += '[';
    out += name->get_ref<const std::string&>();
    out += '(';
    out += string_member(*function, "arguments");
    out += ")]";
  }
}

}  // namespace

std::string render_llmd_sim_chat(const Json& body) {
  std::string rendered;
  if (!body.is_object()) {
    return rendered;
  }
  auto messages = body.find("messages");
  if (messages == body.end() || !messages->is_array()) {
    return rendered;
  }
  for (const auto& message : *messages) {
    rendered += "### ";
    rendered += string_member(message, "role");
    if (auto id = string_member(message, "tool_call_id"); !id.empty()) {
      rendered += '(';
      rendered += id;
      rendered += ')';
    }
    rendered += ": ";
    if (message.is_object()) {
      append_content(message, rendered);
      append_tool_calls(message, rendered);
    }
    rendered += '\n';
  }
  return rendered;
}

std::vector<TokenId> llmd_sim_prompt_tokens(const openai::RequestSummary& request) {
  if (request.chat_body) {
    return tokenizer::llmd_sim_tokens(render_llmd_sim_chat(*request.chat_body));
  }
  if (const auto* text = std::get_if<std::string>(&request.prompt)) {
    return tokenizer::llmd_sim_tokens(*text);
  }
  if (const auto* ids = std::get_if<std::vector<TokenId>>(&request.prompt)) {
    return *ids;
  }
  return {};
}

}  // namespace kvgate::prompt
