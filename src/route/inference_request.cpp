#include "kvgate/route/inference_request.hpp"

namespace kvgate::route {

Result<InferenceRequest, InferenceError> prepare_inference(const RoutingTable& table, std::string_view body,
                                                           openai::Endpoint endpoint,
                                                           const openai::SessionKeyInput& keys,
                                                           const tenant::Tenant& tenant, const std::tm& local_time) {
  auto summary = openai::inspect_request(body, endpoint, keys);
  if (!summary) {
    return unexpected(InferenceError{summary.error()});
  }
  const auto [model, adapter] = table.find_served(summary->model, summary->lora_path);
  if (model == nullptr) {
    // The client's model name never becomes a metric label (unbounded).
    return unexpected(InferenceError{openai::model_not_found(
        summary->lora_path ? summary->model + " with lora_path " + *summary->lora_path : summary->model)});
  }
  std::string salt_override;
  if (model->cache_isolation == config::CacheIsolation::tenant) {
    salt_override = tenant.cache_salt;
    summary->cache_salt = salt_override;
    if (summary->session_key) {
      summary->session_key = tenant.name + ":" + *summary->session_key;
    }
  }
  auto prompt = prompt::prepare_prompt(model->prompt_model(adapter), *summary, local_time);
  if (!prompt) {
    return unexpected(InferenceError{prompt.error(), model});
  }
  return InferenceRequest{std::move(*summary), model, std::move(*prompt), std::move(salt_override)};
}

}  // namespace kvgate::route
