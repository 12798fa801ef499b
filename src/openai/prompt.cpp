#include "kvgate/openai/prompt.hpp"

#include <nlohmann/json.hpp>

namespace kvgate::openai {
namespace {

template <class Json>
std::string content_text(const Json& content) {
  if (content.is_string()) {
    return content.template get<std::string>();
  }
  std::string text;
  if (!content.is_array()) {
    return text;
  }
  bool first = true;
  for (const auto& part : content) {
    if (!part.is_object()) {
      continue;
    }
    auto type = part.find("type");
    auto part_text = part.find("text");
    if (type != part.end() && type->is_string() && *type == "text" && part_text != part.end() &&
        part_text->is_string()) {
      if (!first) {
        text += '\n';
      }
      text += part_text->template get_ref<const std::string&>();
      first = false;
    }
  }
  return text;
}

template <class Json>
openai::PromptInput chat_prompt(const Json& body) {
  auto messages = body.find("messages");
  if (messages == body.end() || !messages->is_array()) {
    return std::monostate{};
  }
  openai::ChatPrompt chat;
  chat.messages.reserve(messages->size());
  for (const auto& message : *messages) {
    if (!message.is_object()) {
      return std::monostate{};
    }
    auto role = message.find("role");
    auto content = message.find("content");
    chat.messages.push_back({role != message.end() && role->is_string() ? role->template get<std::string>() : "user",
                             content != message.end() ? content_text(*content) : std::string()});
  }
  if (auto add = body.find("add_generation_prompt"); add != body.end() && add->is_boolean()) {
    chat.add_generation_prompt = add->template get<bool>();
  }
  return chat;
}

template <class Json>
openai::PromptInput completion_prompt(const Json& body) {
  auto prompt = body.find("prompt");
  if (prompt == body.end()) {
    return std::monostate{};
  }
  if (prompt->is_string()) {
    return prompt->template get<std::string>();
  }
  if (!prompt->is_array() || prompt->empty()) {
    return std::monostate{};
  }
  std::vector<kvgate::TokenId> ids;
  ids.reserve(prompt->size());
  for (const auto& token : *prompt) {
    if (!token.is_number_unsigned() || token.template get<std::uint64_t>() > UINT32_MAX) {
      return std::monostate{};
    }
    ids.push_back(token.template get<kvgate::TokenId>());
  }
  return ids;
}

template <class Json>
openai::PromptInput extract_prompt_from(const Json& body, Endpoint endpoint) {
  if (!body.is_object()) {
    return std::monostate{};
  }
  return endpoint == Endpoint::chat_completions ? chat_prompt(body) : completion_prompt(body);
}

template <class Json>
std::optional<std::string> extract_cache_salt_from(const Json& body) {
  if (!body.is_object()) {
    return std::nullopt;
  }
  auto salt = body.find("cache_salt");
  if (salt == body.end() || !salt->is_string() || salt->template get_ref<const std::string&>().empty()) {
    return std::nullopt;
  }
  return salt->template get<std::string>();
}

}  // namespace

openai::PromptInput extract_prompt(const nlohmann::json& body, Endpoint endpoint) {
  return extract_prompt_from(body, endpoint);
}
openai::PromptInput extract_prompt(const nlohmann::ordered_json& body, Endpoint endpoint) {
  return extract_prompt_from(body, endpoint);
}
std::optional<std::string> extract_cache_salt(const nlohmann::json& body) {
  return extract_cache_salt_from(body);
}
std::optional<std::string> extract_cache_salt(const nlohmann::ordered_json& body) {
  return extract_cache_salt_from(body);
}

}  // namespace kvgate::openai
