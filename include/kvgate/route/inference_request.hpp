#pragma once
// The front half of every routed inference request, in one place for the
// data plane and POST /debug/route: read the body's routing fields, find
// the model, prepare its prompt (tokens, blocks). The two must agree, or a
// dry run would explain a decision the real request does not get.
#include <cstdint>
#include <ctime>
#include <optional>
#include <string_view>

#include "kvgate/core/result.hpp"
#include "kvgate/openai/errors.hpp"
#include "kvgate/openai/request.hpp"
#include "kvgate/prompt/prepared_prompt.hpp"
#include "kvgate/route/routing_table.hpp"

namespace kvgate::route {

struct InferenceRequest {
  openai::RequestSummary summary;
  const ModelRoute* model = nullptr;
  prompt::PreparedPrompt prompt;
  // The model isolates tenants' caches: the body the worker gets carries
  // this cache_salt (the tenant's, replacing any the client sent). Empty:
  // the body's own.
  std::string cache_salt_override;

  [[nodiscard]] std::optional<std::string_view> session_key() const {
    return summary.session_key ? std::optional<std::string_view>(*summary.session_key) : std::nullopt;
  }
};

// Errors: 400 (malformed body, failing chat template: code
// chat_template_error), 404 (unknown model).
struct InferenceError {
  openai::ApiError error;
  const ModelRoute* model = nullptr;  // set when the model was found
};

// `local_time`: what the chat template's strftime_now reads (the shell's
// local clock, core/clock.hpp). For a model
// with cache_isolation: tenant, the prompt is hashed under the tenant's
// salt and the session key is the tenant's own ("tenant:key"), so neither
// the index nor the session table mixes tenants.
Result<InferenceRequest, InferenceError> prepare_inference(const RoutingTable& table, std::string_view body,
                                                           openai::Endpoint endpoint,
                                                           const openai::SessionKeyInput& keys,
                                                           const tenant::Tenant& tenant, const std::tm& local_time);

}  // namespace kvgate::route
