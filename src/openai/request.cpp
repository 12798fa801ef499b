#include "kvgate/openai/request.hpp"

#include <algorithm>
#include <nlohmann/json.hpp>

#include "kvgate/jsonio/parse.hpp"

#include "kvgate/openai/prompt.hpp"

namespace kvgate::openai {
namespace {

// Ordered: a chat body is kept for the chat template, whose tojson output
// shows key order.
using json = nlohmann::ordered_json;

std::string_view type_name(const json& value) {
  return value.type_name();
}

ApiError wrong_type(std::string_view field, std::string_view expected, const json& value) {
  return invalid_request(
      "'" + std::string(field) + "' must be " + std::string(expected) + ", not " + std::string(type_name(value)) + ".",
      std::string(field), "invalid_type");
}

std::optional<ApiError> check_optional_string(const json& body, const char* field) {
  auto found = body.find(field);
  if (found != body.end() && !found->is_null() && !found->is_string()) {
    return wrong_type(field, "a string", *found);
  }
  return std::nullopt;
}

std::optional<ApiError> check_endpoint_fields(const json& body, Endpoint endpoint) {
  if (endpoint == Endpoint::chat_completions) {
    auto messages = body.find("messages");
    if (messages == body.end()) {
      return invalid_request("'messages' is required.", "messages", "missing_required_parameter");
    }
    if (!messages->is_array()) {
      return wrong_type("messages", "an array", *messages);
    }
    if (messages->empty()) {
      return invalid_request("'messages' must contain at least one message.", "messages", "empty_array");
    }
    for (std::size_t index = 0; index < messages->size(); ++index) {
      const auto& message = (*messages)[index];
      auto field = "messages[" + std::to_string(index) + "]";
      if (!message.is_object()) {
        return wrong_type(field, "an object", message);
      }
      auto role = message.find("role");
      if (role == message.end() || !role->is_string()) {
        return invalid_request("'" + field + ".role' is required and must be a string.", field + ".role",
                               "invalid_value");
      }
    }
    return std::nullopt;
  }
  auto prompt = body.find("prompt");
  if (prompt == body.end()) {
    return invalid_request("'prompt' is required.", "prompt", "missing_required_parameter");
  }
  if (!prompt->is_string() && !prompt->is_array()) {
    return wrong_type("prompt", "a string or an array", *prompt);
  }
  return std::nullopt;
}

Result<bool, ApiError> read_stream_flags(const json& body, bool& include_usage) {
  bool stream = false;
  if (auto found = body.find("stream"); found != body.end() && !found->is_null()) {
    if (!found->is_boolean()) {
      return unexpected(wrong_type("stream", "a boolean", *found));
    }
    stream = found->get<bool>();
  }
  if (auto options = body.find("stream_options"); options != body.end() && !options->is_null()) {
    if (!options->is_object()) {
      return unexpected(wrong_type("stream_options", "an object", *options));
    }
    if (auto usage = options->find("include_usage"); usage != options->end() && !usage->is_null()) {
      if (!usage->is_boolean()) {
        return unexpected(wrong_type("stream_options.include_usage", "a boolean", *usage));
      }
      include_usage = usage->get<bool>();
    }
  }
  return stream;
}

}  // namespace

std::size_t json_nesting_depth(std::string_view text) {
  std::size_t depth = 0;
  std::size_t deepest = 0;
  bool in_string = false;
  bool escaped = false;
  for (char c : text) {
    if (in_string) {
      if (escaped) {
        escaped = false;
      } else if (c == '\\') {
        escaped = true;
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      deepest = std::max(deepest, ++depth);
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
  return deepest;
}

std::optional<ApiError> check_json_depth(std::string_view body) {
  if (json_nesting_depth(body) <= kMaxJsonDepth) {
    return std::nullopt;
  }
  return invalid_request(
      "The request body nests arrays or objects deeper than " + std::to_string(kMaxJsonDepth) + " levels.", {},
      "json_too_deep");
}

Result<RequestSummary, ApiError> inspect_request(std::string_view body_text, Endpoint endpoint,
                                                 const SessionKeyInput& keys) {
  // Checked before parsing: the parser recurses once per level, and no
  // engine reads a body nested this deep (vLLM's own request models would
  // reject it after a costly parse).
  if (auto too_deep = check_json_depth(body_text)) {
    return unexpected(std::move(*too_deep));
  }
  auto parsed = jsonio::parse_ordered(body_text);
  if (!parsed) {
    return unexpected(invalid_json(body_text.empty() ? "the body is empty" : "parse error or invalid UTF-8"));
  }
  json body = std::move(*parsed);
  if (!body.is_object()) {
    return unexpected(invalid_request("The request body must be a JSON object.", {}, "invalid_type"));
  }
  RequestSummary summary;
  auto model = body.find("model");
  if (model == body.end() || model->is_null()) {
    return unexpected(invalid_request("'model' is required.", "model", "missing_required_parameter"));
  }
  if (!model->is_string()) {
    return unexpected(wrong_type("model", "a string", *model));
  }
  summary.model = model->get<std::string>();
  if (auto problem = check_endpoint_fields(body, endpoint)) {
    return unexpected(std::move(*problem));
  }
  for (const char* field : {"user", "prompt_cache_key", "cache_salt", "lora_path"}) {
    if (auto problem = check_optional_string(body, field)) {
      return unexpected(std::move(*problem));
    }
  }
  auto stream = read_stream_flags(body, summary.include_usage);
  if (!stream) {
    return unexpected(stream.error());
  }
  summary.stream = *stream;
  if (endpoint == Endpoint::completions) {
    summary.prompt = extract_prompt(body, endpoint);
  }
  summary.cache_salt = extract_cache_salt(body);
  if (auto lora_path = body.find("lora_path"); lora_path != body.end() && lora_path->is_string()) {
    summary.lora_path = lora_path->get<std::string>();
  }
  summary.has_cache_salt_member = body.contains("cache_salt");
  for (std::size_t at = 0; at < keys.sources.size() && at < config::kMaxSessionKeySources; ++at) {
    const auto& source = keys.sources[at];
    std::string_view key;
    if (source.place == config::SessionKeyPlace::header) {
      key = keys.header_values[at];
    } else if (auto found = body.find(source.name); found != body.end() && found->is_string()) {
      key = found->get_ref<const std::string&>();
    }
    if (!key.empty()) {
      summary.session_key = std::string(key);
      summary.session_key_source = source.label;
      break;
    }
  }
  if (endpoint == Endpoint::chat_completions) {
    summary.chat_body = std::make_shared<const json>(std::move(body));
  }
  return summary;
}

namespace {

// `member` ("key":value) as the object's first member, when the body
// cannot hold `quoted_key` anywhere as text (empty: the caller knows the key
// is absent); nullopt otherwise (the key may be inside a string value, or
// really present: the document decides).
std::optional<std::string> insert_first_member(std::string_view body, std::string_view quoted_key,
                                               std::string_view member) {
  if (!quoted_key.empty() && body.find(quoted_key) != std::string_view::npos) {
    return std::nullopt;
  }
  auto open = body.find('{');
  if (open == std::string_view::npos) {
    return std::nullopt;
  }
  std::string result;
  result.reserve(body.size() + member.size() + 1);
  result.append(body.substr(0, open + 1)).append(member);
  auto rest = body.substr(open + 1);
  auto first = rest.find_first_not_of(" \t\r\n");
  if (first != std::string_view::npos && rest[first] != '}') {
    result.push_back(',');
  }
  result.append(rest);
  return result;
}

}  // namespace

std::string with_stream_usage(std::string_view body) {
  if (auto inserted = insert_first_member(body, R"("stream_options")", R"("stream_options":{"include_usage":true})")) {
    return std::move(*inserted);
  }
  auto document = jsonio::parse_ordered(body);
  if (!document || !document->is_object()) {
    return std::string(body);
  }
  auto& options = (*document)["stream_options"];
  if (!options.is_object()) {
    options = nlohmann::ordered_json::object();
  }
  options["include_usage"] = true;
  return document->dump();
}

std::string with_cache_salt(std::string_view body, std::string_view salt, bool has_member) {
  if (!has_member) {
    const auto member = R"("cache_salt":)" + nlohmann::json(std::string(salt)).dump();
    if (auto inserted = insert_first_member(body, {}, member)) {
      return std::move(*inserted);
    }
  }
  auto document = jsonio::parse_ordered(body);
  if (!document || !document->is_object()) {
    return std::string(body);
  }
  (*document)["cache_salt"] = std::string(salt);
  return document->dump();
}

std::string models_list(const std::vector<ListedModel>& models, long created_unix_seconds) {
  using nlohmann::json;
  json data = json::array();
  for (const auto& model : models) {
    data.push_back({{"id", model.id},
                    {"object", "model"},
                    {"created", created_unix_seconds},
                    {"owned_by", "kvgate"},
                    {"root", model.id},
                    {"parent", model.parent.empty() ? json(nullptr) : json(model.parent)}});
  }
  return json{{"object", "list"}, {"data", std::move(data)}}.dump();
}

}  // namespace kvgate::openai
