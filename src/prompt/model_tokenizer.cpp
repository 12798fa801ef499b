#include "kvgate/prompt/model_tokenizer.hpp"

#include <filesystem>
#include <nlohmann/json.hpp>

#include "kvgate/core/file.hpp"

namespace kvgate::prompt {

Result<std::optional<std::string>, std::string> read_chat_template(const std::string& folder,
                                                                   const nlohmann::json& config) {
  const auto file = std::filesystem::path(folder) / "chat_template.jinja";
  std::error_code error;
  if (std::filesystem::exists(file, error)) {
    if (!std::filesystem::is_regular_file(file, error)) {
      return unexpected(file.string() + ": not a file");
    }
    auto text = read_whole_file(file.string());
    if (!text) {
      return unexpected(text.error().message);
    }
    return std::optional<std::string>(std::move(*text));
  }
  if (!config.is_object() || !config.contains("chat_template") || config["chat_template"].is_null()) {
    return std::optional<std::string>();
  }
  const auto& entry = config["chat_template"];
  if (entry.is_string()) {
    return std::optional<std::string>(entry.get<std::string>());
  }
  if (entry.is_array()) {
    // transformers picks the template named "default" when none is asked
    // for, and vLLM asks for none.
    for (const auto& named : entry) {
      if (named.is_object() && named.value("name", "") == "default" && named.contains("template") &&
          named["template"].is_string()) {
        return std::optional<std::string>(named["template"].get<std::string>());
      }
    }
    return unexpected(folder + "/tokenizer_config.json: chat_template lists templates but none named \"default\"");
  }
  return unexpected(folder + "/tokenizer_config.json: chat_template is neither a string nor a list of templates");
}

Result<std::optional<KvShape>, std::string> read_kv_shape(const std::string& folder) {
  const auto file = std::filesystem::path(folder) / "config.json";
  std::error_code error;
  if (!std::filesystem::exists(file, error)) {
    return std::optional<KvShape>();
  }
  auto text = read_whole_file(file.string());
  if (!text) {
    return unexpected(text.error().message);
  }
  auto parsed = nlohmann::json::parse(*text, nullptr, false);
  if (parsed.is_discarded()) {
    return unexpected(file.string() + ": not JSON");
  }
  auto shape = kv_shape_from_config(parsed);
  if (!shape) {
    return unexpected(file.string() + ": " + shape.error());
  }
  return std::optional<KvShape>(std::move(*shape));
}

Result<std::shared_ptr<const ModelTokenizer>, std::string> load_model_tokenizer(const std::string& folder) {
  try {
    auto tokenizer = tokenizer::Tokenizer::load_folder(folder);
    // Before it serves: the first long word of a request must not pay them.
    tokenizer.prepare_long_words();
    std::optional<chat_template::ChatTemplate> compiled;
    const auto& config = tokenizer.config();
    auto source = read_chat_template(folder, config);
    if (!source) {
      return unexpected(source.error());
    }
    if (*source) {
      auto result = chat_template::ChatTemplate::compile(**source);
      if (!result) {
        return unexpected(folder + ": " + result.error());
      }
      compiled.emplace(std::move(*result));
    }
    auto special = special_tokens_from_config(config);
    auto shape = read_kv_shape(folder);
    return std::make_shared<const ModelTokenizer>(ModelTokenizer{folder, std::move(tokenizer), std::move(compiled),
                                                                 std::move(special), shape ? *shape : std::nullopt,
                                                                 shape ? std::string() : shape.error()});
  } catch (const tokenizer::TokenizerLoadError& error) {
    return unexpected(folder + ": " + error.what());
  }
}

}  // namespace kvgate::prompt
