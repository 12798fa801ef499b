#pragma once
// An OpenAI chat request body (JSON) prepared for a chat template the way vLLM
// prepares it (vllm/entrypoints/chat_utils.py), so the prompt kvgate renders
// is the one the engine renders:
//  - content: for templates that loop over message content, a list of parts
//    (a string becomes one text part, null an empty list); for the others,
//    the text parts joined by "\n" (null becomes "").
//  - assistant tool_calls: `function.arguments` given as a JSON string is
//    parsed into an object (empty or absent: {}).
//  - tools, add_generation_prompt (default true) and chat_template_kwargs
//    (each key a template variable) are passed through.
#include <memory>
#include <string>

#include <nlohmann/json_fwd.hpp>

#include "kvgate/chat_template/chat_template.hpp"
#include "kvgate/chat_template/value.hpp"
#include "kvgate/core/result.hpp"

namespace kvgate::prompt {

struct SpecialTokens {
  chat_template::Value bos_token;  // string or none, from tokenizer_config.json
  chat_template::Value eos_token;
};

// tokenizer_config.json's bos_token/eos_token (a string or {"content": ...}).
SpecialTokens special_tokens_from_config(const nlohmann::json& tokenizer_config);

// Errors describe what in the request is malformed (for a 400). With the
// `owner` of `body` (the request's shared document), the messages' strings
// are shared from the body instead of copied: the input keeps it alive.
Result<chat_template::RenderInput, std::string> render_input_from_request(
    const nlohmann::ordered_json& body, const chat_template::ChatTemplate& chat_template, const SpecialTokens& tokens,
    const std::shared_ptr<const void>& owner = nullptr);

}  // namespace kvgate::prompt
