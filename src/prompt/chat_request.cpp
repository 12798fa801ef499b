#include "kvgate/prompt/chat_request.hpp"

#include <algorithm>
#include <nlohmann/json.hpp>

namespace kvgate::prompt {

using chat_template::List;
using chat_template::Mapping;
using chat_template::None;
using chat_template::RenderInput;
using chat_template::Value;

namespace {

using json = nlohmann::ordered_json;

Value token_value(const nlohmann::json& config, const char* key) {
  if (!config.is_object() || !config.contains(key)) {
    return Value(None{});
  }
  const nlohmann::json& token = config[key];
  if (token.is_string()) {
    return Value(token.get<std::string>());
  }
  if (token.is_object() && token.contains("content") && token["content"].is_string()) {
    return Value(token["content"].get<std::string>());
  }
  return Value(None{});
}

Value text_part(const std::shared_ptr<const void>& owner, const std::string& text) {
  return Value(Mapping{{"type", Value("text")}, {"text", Value::text_in(owner, text)}});
}

Result<Value, std::string> prepare_content(const json& content, bool keep_list,
                                           const std::shared_ptr<const void>& owner) {
  if (content.is_string()) {  // the usual case
    if (!keep_list) {
      return Value::text_in(owner, content.get_ref<const std::string&>());
    }
    return Value(List{text_part(owner, content.get_ref<const std::string&>())});
  }
  if (content.is_null()) {
    return keep_list ? Value(List{}) : Value(std::string());
  }
  if (!content.is_array()) {
    return unexpected(std::string("message content must be a string, a list of parts or null"));
  }
  if (keep_list) {
    return Value::from_json(content, owner);
  }
  std::string text;
  bool first = true;
  for (const auto& part : content) {
    if (!part.is_object()) {
      return unexpected(std::string("content parts must be objects"));
    }
    auto type = part.find("type");
    if (type == part.end() || !type->is_string() || type->get_ref<const std::string&>() != "text") {
      continue;
    }
    auto part_text = part.find("text");
    if (part_text == part.end() || !part_text->is_string()) {
      return unexpected(std::string("text part without a string text"));
    }
    if (!first) {
      text += '\n';
    }
    text += part_text->get_ref<const std::string&>();
    first = false;
  }
  return Value(std::move(text));
}

Result<Value, std::string> prepare_tool_calls(const json& calls) {
  json prepared = calls;
  for (auto& call : prepared) {
    if (!call.is_object() || !call.contains("function") || !call["function"].is_object()) {
      continue;
    }
    json& function = call["function"];
    json arguments = function.value("arguments", json());
    if (arguments.is_string() && !arguments.get<std::string>().empty()) {
      json parsed = json::parse(arguments.get<std::string>(), nullptr, false);
      if (parsed.is_discarded()) {
        return unexpected(std::string("tool call arguments are not valid JSON"));
      }
      function["arguments"] = std::move(parsed);
    } else if (arguments.is_null() || (arguments.is_string() && arguments.get<std::string>().empty())) {
      function["arguments"] = json::object();
    }
  }
  return Value::from_json(prepared);
}

Result<Value, std::string> prepare_message(const json& message, bool keep_list,
                                           const std::shared_ptr<const void>& owner) {
  if (!message.is_object()) {
    return unexpected(std::string("each message must be an object"));
  }
  Mapping prepared;
  for (const auto& [key, item] : message.items()) {
    if (key == "content") {
      continue;
    }
    if (key == "tool_calls" && item.is_array() && message.value("role", "") == "assistant") {
      auto calls = prepare_tool_calls(item);
      if (!calls) {
        return unexpected(calls.error());
      }
      prepared.emplace_back(key, std::move(*calls));
      continue;
    }
    prepared.emplace_back(key, Value::from_json(item, owner));
  }
  static const json kNoContent;
  auto content = prepare_content(message.contains("content") ? message["content"] : kNoContent, keep_list, owner);
  if (!content) {
    return unexpected(content.error());
  }
  // vLLM's parsed message lists role first, then content.
  auto role = std::find_if(prepared.begin(), prepared.end(), [](const auto& entry) { return entry.first == "role"; });
  auto position = role == prepared.end() ? prepared.begin() : role + 1;
  prepared.insert(position, {"content", std::move(*content)});
  return Value(std::move(prepared));
}

}  // namespace

SpecialTokens special_tokens_from_config(const nlohmann::json& tokenizer_config) {
  return {token_value(tokenizer_config, "bos_token"), token_value(tokenizer_config, "eos_token")};
}

Result<RenderInput, std::string> render_input_from_request(const nlohmann::ordered_json& body,
                                                           const chat_template::ChatTemplate& chat_template,
                                                           const SpecialTokens& tokens,
                                                           const std::shared_ptr<const void>& owner) {
  if (!body.is_object() || !body.contains("messages") || !body["messages"].is_array()) {
    return unexpected(std::string("'messages' must be a list of messages"));
  }
  RenderInput input;
  List messages;
  for (const auto& message : body["messages"]) {
    auto prepared = prepare_message(message, chat_template.iterates_content(), owner);
    if (!prepared) {
      return unexpected(prepared.error());
    }
    messages.push_back(std::move(*prepared));
  }
  input.messages = Value(std::move(messages));
  if (body.contains("tools") && !body["tools"].is_null()) {
    input.tools = Value::from_json(body["tools"], owner);
  }
  if (body.contains("add_generation_prompt")) {
    if (!body["add_generation_prompt"].is_boolean()) {
      return unexpected(std::string("'add_generation_prompt' must be a boolean"));
    }
    input.add_generation_prompt = body["add_generation_prompt"].get<bool>();
  }
  input.bos_token = tokens.bos_token;
  input.eos_token = tokens.eos_token;
  if (body.contains("chat_template_kwargs") && !body["chat_template_kwargs"].is_null()) {
    const json& extra = body["chat_template_kwargs"];
    if (!extra.is_object()) {
      return unexpected(std::string("'chat_template_kwargs' must be an object"));
    }
    for (const auto& [key, item] : extra.items()) {
      input.extra.emplace_back(key, Value::from_json(item, owner));
    }
  }
  return input;
}

}  // namespace kvgate::prompt
