#pragma once
// The prompt of an OpenAI request body as the engine will read it. Shared
// by the gateway (routing) and kvgate-sim (its engine), so both agree on
// what a request's tokens are.
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>

#include "kvgate/openai/prompt_input.hpp"
#include "kvgate/openai/request.hpp"

namespace kvgate::openai {

// Chat: messages (role, default "user"; content as a string or the "text"
// parts of a list) and add_generation_prompt (vLLM's extension, default
// true). Completions: a string, or a list of token ids; anything else
// (batched prompts) gives monostate. Never throws on any JSON value.
openai::PromptInput extract_prompt(const nlohmann::json& body, Endpoint endpoint);
openai::PromptInput extract_prompt(const nlohmann::ordered_json& body, Endpoint endpoint);

// The body's cache_salt when it is a non-empty string (vLLM and SGLang
// partition their prefix cache by it).
std::optional<std::string> extract_cache_salt(const nlohmann::json& body);
std::optional<std::string> extract_cache_salt(const nlohmann::ordered_json& body);

}  // namespace kvgate::openai
