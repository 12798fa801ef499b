#pragma once
// Inspection of OpenAI request bodies: just enough to route them (model,
// streaming, session key) and to reject bodies an engine would reject as
// malformed. The body itself is forwarded unchanged.
#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kvgate/core/result.hpp"
#include "kvgate/openai/errors.hpp"
#include "kvgate/openai/prompt_input.hpp"
#include "kvgate/openai/session_key.hpp"

namespace kvgate::openai {

enum class Endpoint { chat_completions, completions };

struct RequestSummary {
  std::string model;
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage
  std::optional<std::string> session_key;
  // The label of the source that gave session_key ("header:x-session-id");
  // views the SessionKeySource it came from.
  std::string_view session_key_source;
  // Completions: what the engine will read (see prompt.hpp). Chat: left
  // empty; the body below holds the messages, read by whichever
  // tokenisation the model uses (extract_prompt for the approximate one).
  openai::PromptInput prompt;
  std::optional<std::string> cache_salt;  // partitions the engine's prefix cache
  // SGLang's way to name a LoRA adapter beside the base model's "model".
  std::optional<std::string> lora_path;
  // The body has a cache_salt member of any value, its key spelt in any
  // escaped form (the parsed document says so; the text cannot).
  bool has_cache_salt_member = false;
  std::shared_ptr<const nlohmann::ordered_json> chat_body;  // chat requests: the parsed body
};

// Bodies nested deeper than this are refused (400 json_too_deep) before
// they are parsed. Chat bodies nest about 6 levels; tool schemas a few more.
inline constexpr std::size_t kMaxJsonDepth = 128;
// Deepest nesting of arrays and objects in JSON text (strings skipped);
// any byte sequence is accepted.
std::size_t json_nesting_depth(std::string_view text);
// 400 json_too_deep for a body nested deeper than kMaxJsonDepth (checked
// for every body kvgate would parse, before it is parsed).
std::optional<ApiError> check_json_depth(std::string_view body);

// Session key: the first of `keys.sources` present with a non-empty
// string (a body field of another type is not a key; user and
// prompt_cache_key of another type are refused as OpenAI refuses them).
Result<RequestSummary, ApiError> inspect_request(std::string_view body, Endpoint endpoint, const SessionKeyInput& keys);

// The body with stream_options.include_usage set to true, everything else
// as it was: inserted as text when the body has no stream_options (the usual
// case), else rewritten with the keys kept in their order. For a body that
// inspect_request accepted.
std::string with_stream_usage(std::string_view body);

// The body with its top-level cache_salt set to `salt`, everything else as
// it was. `has_member` (RequestSummary::has_cache_salt_member): the client
// sent one, which the parsed document replaces; otherwise the member is
// inserted as text. Never a duplicate key: engines disagree on which of two
// wins, and a client's salt must not survive tenant isolation.
std::string with_cache_salt(std::string_view body, std::string_view salt, bool has_member);

// One entry of GET /v1/models: a base model (no parent) or a LoRA adapter
// served on `parent`, as vLLM lists them.
struct ListedModel {
  std::string id;
  std::string parent;  // empty: a base model
};

// Body of GET /v1/models in OpenAI's list shape (vLLM's "root" and
// "parent" fields included).
std::string models_list(const std::vector<ListedModel>& models, long created_unix_seconds);

}  // namespace kvgate::openai
