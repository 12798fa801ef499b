#pragma once
// A model's exact tokenisation, loaded from its `tokenizer` folder at start-up
// or reload: the Hugging Face tokenizer and, when the folder has one, the
// compiled chat template. Immutable and shared by every request.
#include <memory>
#include <optional>
#include <string>

#include <nlohmann/json_fwd.hpp>
#include "kvgate/chat_template/chat_template.hpp"
#include "kvgate/core/result.hpp"
#include "kvgate/prompt/chat_request.hpp"
#include "kvgate/prompt/kv_shape.hpp"
#include "kvgate/tokenizer/hf_tokenizer.hpp"

namespace kvgate::prompt {

struct ModelTokenizer {
  std::string folder;
  tokenizer::Tokenizer tokenizer;
  std::optional<chat_template::ChatTemplate> chat_template;  // absent: chat requests route without prefix data
  SpecialTokens special_tokens;
  // One token's KV bytes from the folder's config.json (prompt/kv_shape.hpp);
  // absent without one. `kv_shape_error`: a config.json that says nothing
  // usable, and why (the configured or default figure is used).
  std::optional<KvShape> kv_shape;
  std::string kv_shape_error;
};

// The KV shape of a model folder's config.json: nullopt without the file,
// an error for one that cannot be read or says nothing usable.
Result<std::optional<KvShape>, std::string> read_kv_shape(const std::string& folder);

// Errors name the folder and what could not be read.
Result<std::shared_ptr<const ModelTokenizer>, std::string> load_model_tokenizer(const std::string& folder);

// The chat template source of a model folder, found as transformers finds it
// (and so vLLM, which renders with the tokenizer transformers loads): a
// `chat_template.jinja` file beside tokenizer_config.json wins (recent
// transformers versions save templates there, e.g. GPT-OSS's snapshots),
// then the config's `chat_template` string, then the entry named "default"
// of its list form ([{"name": ..., "template": ...}], the form of models
// with several templates). Empty when the folder has none. Errors: an
// unreadable file, a list without a default, a `chat_template` of another
// type. Start-up only.
Result<std::optional<std::string>, std::string> read_chat_template(const std::string& folder,
                                                                   const nlohmann::json& config);

}  // namespace kvgate::prompt
