#include "kvgate/openai/prompt.hpp"

#include <nlohmann/json.hpp>

namespace kvgate::openai {
namespace {

using nlohmann::json;

std::string content_text(const json& content) {
  if (content.is_string()) {
    return content.get<std::string>();
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
      text += part_text->get_ref<const std::string&>();
      first = false;
    }
  }
  return text;
}

tokenizer::PromptInput chat_prompt(const json& body) {
  auto messages = body.find("messages");
  if (messages == body.end() || !messages->is_array()) {
    return std::monostate{};
  }
  tokenizer::ChatPrompt chat;
  chat.messages.reserve(messages->size());
  for (const auto& message : *messages) {
    if (!message.is_object()) {
      return std::monostate{};
    }
    auto role = message.find("role");
    auto content = message.find("content");
    chat.messages.push_back({role != message.end() && role->is_string() ? role->get<std::string>() : "user",
                             content != message.end() ? content_text(*content) : std::string()});
  }
  if (auto add = body.find("add_generation_prompt"); add != body.end() && add->is_boolean()) {
    chat.add_generation_prompt = add->get<bool>();
  }
  return chat;
}

tokenizer::PromptInput completion_prompt(const json& body) {
  auto prompt = body.find("prompt");
  if (prompt == body.end()) {
    return std::monostate{};
  }
  if (prompt->is_string()) {
    return prompt->get<std::string>();
  }
  if (!prompt->is_array() || prompt->empty()) {
    return std::monostate{};
  }
  std::vector<prefix::TokenId> ids;
  ids.reserve(prompt->size());
  for (const auto& token : *prompt) {
    if (!token.is_number_unsigned() || token.get<std::uint64_t>() > UINT32_MAX) {
      return std::monostate{};
    }
    ids.push_back(token.get<prefix::TokenId>());
  }
  return ids;
}

}  // namespace

tokenizer::PromptInput extract_prompt(const json& body, Endpoint endpoint) {
  if (!body.is_object()) {
    return std::monostate{};
  }
  return endpoint == Endpoint::chat_completions ? chat_prompt(body) : completion_prompt(body);
}

std::optional<std::string> extract_cache_salt(const json& body) {
  if (!body.is_object()) {
    return std::nullopt;
  }
  auto salt = body.find("cache_salt");
  if (salt == body.end() || !salt->is_string() || salt->get_ref<const std::string&>().empty()) {
    return std::nullopt;
  }
  return salt->get<std::string>();
}

}  // namespace kvgate::openai
