#pragma once
// A model's exact tokenisation, loaded from its `tokenizer` folder at start-up
// or reload: the Hugging Face tokenizer and, when tokenizer_config.json has
// one, the compiled chat template. Immutable and shared by every request.
#include <memory>
#include <optional>
#include <string>

#include "kvgate/chat_template/chat_template.hpp"
#include "kvgate/core/result.hpp"
#include "kvgate/prompt/chat_request.hpp"
#include "kvgate/tokenizer/hf_tokenizer.hpp"

namespace kvgate::prompt {

struct ModelTokenizer {
  std::string folder;
  tokenizer::Tokenizer tokenizer;
  std::optional<chat_template::ChatTemplate> chat_template;  // absent: chat requests route without prefix data
  SpecialTokens special_tokens;
};

// Errors name the folder and what could not be read.
Result<std::shared_ptr<const ModelTokenizer>, std::string> load_model_tokenizer(const std::string& folder);

}  // namespace kvgate::prompt
