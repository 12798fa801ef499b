#pragma once
// kvgate's own errors, in OpenAI's nested shape:
// {"error": {"message", "type", "param", "code"}}. Engine errors are passed
// through untouched; only errors kvgate itself decides are built here.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace kvgate::openai {

struct ApiError {
  int status = 500;
  std::string message;
  std::string type;   // invalid_request_error, authentication_error, ...
  std::string param;  // empty: null
  std::string code;   // empty: null
  // Sent as Retry-After (whole seconds, at least 1) when > 0.
  std::uint64_t retry_after_ms = 0;
};

ApiError invalid_request(std::string message, std::string param = {}, std::string code = {});
ApiError invalid_json(std::string_view detail);
ApiError unauthorized();
ApiError model_not_found(std::string_view model);
ApiError not_found(std::string_view path);
ApiError method_not_allowed(std::string_view method, std::string_view path);
ApiError body_too_large(std::uint64_t limit_bytes);
ApiError no_healthy_worker(std::string_view model);
ApiError upstream_failure(std::string_view detail);
ApiError upstream_timeout(std::string_view detail);
ApiError upstream_stream_interrupted(std::string_view detail);
// 429: a tenant's per-minute budget is spent (`tokens`: the prompt-token
// one), or the admission queue is full or its wait ran out (`code`:
// queue_full, queue_timeout).
ApiError rate_limited(std::string_view detail, bool tokens, std::uint64_t retry_after_ms);
ApiError overloaded(std::string_view detail, std::string code, std::uint64_t retry_after_ms);

// One of each error kvgate answers by itself whatever its configuration
// (the metrics declare their status and code at 0 from the start).
std::vector<ApiError> common_errors();

// The JSON body for a response.
std::string error_body(const ApiError& error);

// What a client reading a stream receives when the upstream dies mid-stream:
// one error event followed by the terminator, so no stream ends silently.
std::string stream_error_events(const ApiError& error);

}  // namespace kvgate::openai
