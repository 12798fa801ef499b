#include "kvgate/openai/errors.hpp"

#include <nlohmann/json.hpp>

namespace kvgate::openai {
namespace {

ApiError make(int status, std::string message, std::string type, std::string param, std::string code) {
  return ApiError{status, std::move(message), std::move(type), std::move(param), std::move(code)};
}

nlohmann::json error_json(const ApiError& error) {
  nlohmann::json body;
  auto& inner = body["error"];
  inner["message"] = error.message;
  inner["type"] = error.type;
  inner["param"] = error.param.empty() ? nlohmann::json(nullptr) : nlohmann::json(error.param);
  inner["code"] = error.code.empty() ? nlohmann::json(nullptr) : nlohmann::json(error.code);
  return body;
}

}  // namespace

ApiError invalid_request(std::string message, std::string param, std::string code) {
  return make(400, std::move(message), "invalid_request_error", std::move(param), std::move(code));
}

ApiError invalid_json(std::string_view detail) {
  return invalid_request("The request body is not valid JSON: " + std::string(detail), {}, "invalid_json");
}

ApiError unauthorized() {
  return make(401, "Missing or invalid API key. Send it as 'Authorization: Bearer <key>'.", "authentication_error", {},
              "invalid_api_key");
}

ApiError rate_limited(std::string_view detail, bool tokens, std::uint64_t retry_after_ms) {
  auto error = make(429, std::string(detail), tokens ? "tokens" : "requests", {}, "rate_limit_exceeded");
  error.retry_after_ms = retry_after_ms;
  return error;
}

ApiError overloaded(std::string_view detail, std::string code, std::uint64_t retry_after_ms) {
  auto error = make(429, std::string(detail), "requests", {}, std::move(code));
  error.retry_after_ms = retry_after_ms;
  return error;
}

ApiError model_not_found(std::string_view model) {
  return make(404, "The model '" + std::string(model) + "' does not exist or is not served by this gateway.",
              "invalid_request_error", "model", "model_not_found");
}

ApiError not_found(std::string_view path) {
  return make(404, "Unknown path '" + std::string(path) + "'.", "invalid_request_error", {}, "not_found");
}

ApiError method_not_allowed(std::string_view method, std::string_view path) {
  return make(405, "Method " + std::string(method) + " is not allowed on '" + std::string(path) + "'.",
              "invalid_request_error", {}, "method_not_allowed");
}

ApiError body_too_large(std::uint64_t limit_bytes) {
  return make(413, "The request body is larger than the limit of " + std::to_string(limit_bytes) + " bytes.",
              "invalid_request_error", {}, "request_too_large");
}

ApiError no_healthy_worker(std::string_view model) {
  return make(503, "No healthy worker is available for model '" + std::string(model) + "'.", "server_error", {},
              "no_healthy_worker");
}

ApiError upstream_failure(std::string_view detail) {
  return make(502, "The upstream worker failed: " + std::string(detail), "server_error", {}, "upstream_error");
}

ApiError upstream_timeout(std::string_view detail) {
  return make(504, "The upstream worker did not answer in time: " + std::string(detail), "server_error", {},
              "upstream_timeout");
}

ApiError upstream_stream_interrupted(std::string_view detail) {
  return make(502, "The upstream worker stopped in the middle of the stream: " + std::string(detail), "server_error",
              {}, "upstream_stream_interrupted");
}

std::vector<ApiError> common_errors() {
  return {invalid_json({}),           unauthorized(),
          model_not_found({}),        not_found({}),
          method_not_allowed({}, {}), body_too_large(0),
          no_healthy_worker({}),      upstream_failure({}),
          upstream_timeout({}),       upstream_stream_interrupted({}),
          rate_limited({}, false, 0), rate_limited({}, true, 0)};
}

// Messages may quote client bytes (a path, a model name) that are not
// UTF-8: those are replaced, never allowed to throw.
std::string error_body(const ApiError& error) {
  return error_json(error).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::string stream_error_events(const ApiError& error) {
  return "data: " + error_body(error) + "\n\ndata: [DONE]\n\n";
}

}  // namespace kvgate::openai
