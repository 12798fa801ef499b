#include "kvgate/prompt/model_tokenizer.hpp"

#include <nlohmann/json.hpp>

namespace kvgate::prompt {

Result<std::shared_ptr<const ModelTokenizer>, std::string> load_model_tokenizer(const std::string& folder) {
  try {
    auto tokenizer = tokenizer::Tokenizer::load_folder(folder);
    // Before it serves: the first long word of a request must not pay them.
    tokenizer.prepare_long_words();
    std::optional<chat_template::ChatTemplate> compiled;
    const auto& config = tokenizer.config();
    if (config.is_object() && config.contains("chat_template") && config["chat_template"].is_string()) {
      auto result = chat_template::ChatTemplate::compile(config["chat_template"].get<std::string>());
      if (!result) {
        return unexpected(folder + ": " + result.error());
      }
      compiled.emplace(std::move(*result));
    }
    auto special = special_tokens_from_config(config);
    return std::make_shared<const ModelTokenizer>(
        ModelTokenizer{folder, std::move(tokenizer), std::move(compiled), std::move(special)});
  } catch (const tokenizer::TokenizerLoadError& error) {
    return unexpected(folder + ": " + error.what());
  }
}

}  // namespace kvgate::prompt
