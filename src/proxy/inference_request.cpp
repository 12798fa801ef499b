#include "kvgate/proxy/inference_request.hpp"

#include <chrono>
#include <ctime>

namespace kvgate::proxy {

namespace {

// The clock strftime_now reads in chat templates: the gateway's local time,
// as the engine's would be.
std::tm local_now() {
  // localtime_r consults the time zone on every call; once a second is enough.
  thread_local std::time_t converted = -1;
  thread_local std::tm local{};
  std::time_t now = std::time(nullptr);
  if (now != converted) {
    localtime_r(&now, &local);
    converted = now;
  }
  return local;
}

}  // namespace

Result<InferenceRequest, InferenceError> prepare_inference(const route::RoutingTable& table, std::string_view body,
                                                           openai::Endpoint endpoint, std::string_view session_header,
                                                           const tenant::Tenant& tenant) {
  auto summary = openai::inspect_request(body, endpoint, session_header);
  if (!summary) {
    return unexpected(InferenceError{summary.error()});
  }
  const auto* model = table.find_model(summary->model);
  if (model == nullptr) {
    // The client's model name never becomes a metric label (unbounded).
    return unexpected(InferenceError{openai::model_not_found(summary->model)});
  }
  std::string salt_override;
  if (model->cache_isolation == config::CacheIsolation::tenant) {
    salt_override = tenant.cache_salt;
    summary->cache_salt = salt_override;
    if (summary->session_key) {
      summary->session_key = tenant.name + ":" + *summary->session_key;
    }
  }
  auto prompt = prompt::prepare_prompt(model->prompt_model(), *summary, local_now());
  if (!prompt) {
    return unexpected(InferenceError{prompt.error(), model});
  }
  return InferenceRequest{std::move(*summary), model, std::move(*prompt), std::move(salt_override)};
}

std::uint64_t unix_now_ms() {
  return static_cast<std::uint64_t>(
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
          .count());
}

}  // namespace kvgate::proxy
