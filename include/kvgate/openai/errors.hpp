#pragma once
// kvgate's own errors, in OpenAI's nested shape:
// {"error": {"message", "type", "param", "code"}}. Engine errors are passed
// through untouched; only errors kvgate itself decides are built here.
#include <cstdint>
#include <string>
#include <string_view>

namespace kvgate::openai {

struct ApiError {
  int status = 500;
  std::string message;
  std::string type;   // invalid_request_error, authentication_error, ...
  std::string param;  // empty: null
  std::string code;   // empty: null
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

// The JSON body for a response.
std::string error_body(const ApiError& error);

// What a client reading a stream receives when the upstream dies mid-stream:
// one error event followed by the terminator, so no stream ends silently.
std::string stream_error_events(const ApiError& error);

}  // namespace kvgate::openai
