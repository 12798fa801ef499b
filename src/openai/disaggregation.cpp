#include "kvgate/openai/disaggregation.hpp"

#include <nlohmann/json.hpp>

namespace kvgate::openai {

namespace {

// ordered_json: the engine gets the client's keys in the client's order.
using Json = nlohmann::ordered_json;

Json parse_object(std::string_view body) {
  auto parsed = Json::parse(body, nullptr, false);
  return parsed.is_object() ? parsed : Json::object();
}

std::optional<std::uint32_t> count(const Json& object, const char* key) {
  if (!object.is_object()) {
    return std::nullopt;
  }
  const auto found = object.find(key);
  if (found == object.end() || !found->is_number_unsigned()) {
    return std::nullopt;
  }
  const auto value = found->get<std::uint64_t>();
  return value <= UINT32_MAX ? std::optional(static_cast<std::uint32_t>(value)) : std::nullopt;
}

}  // namespace

std::string vllm_prefill_body(std::string_view body) {
  auto request = parse_object(body);
  request["kv_transfer_params"] = {{"do_remote_decode", true},    {"do_remote_prefill", false},
                                   {"remote_engine_id", nullptr}, {"remote_block_ids", nullptr},
                                   {"remote_host", nullptr},      {"remote_port", nullptr}};
  request["stream"] = false;
  request["max_tokens"] = 1;
  if (request.contains("max_completion_tokens")) {
    request["max_completion_tokens"] = 1;
  }
  for (const char* key : {"stream_options", "min_tokens", "min_completion_tokens"}) {
    request.erase(key);
  }
  return request.dump(-1, ' ', false, Json::error_handler_t::replace);
}

std::optional<PrefillAnswer> read_prefill_answer(std::string_view body) {
  const auto answer = Json::parse(body, nullptr, false);
  if (!answer.is_object()) {
    return std::nullopt;
  }
  PrefillAnswer result;
  if (const auto params = answer.find("kv_transfer_params"); params != answer.end() && params->is_object()) {
    result.kv_transfer_params = params->dump(-1, ' ', false, Json::error_handler_t::replace);
  }
  if (const auto usage = answer.find("usage"); usage != answer.end() && usage->is_object()) {
    result.prompt_tokens = count(*usage, "prompt_tokens");
    if (const auto details = usage->find("prompt_tokens_details"); details != usage->end()) {
      result.cached_tokens = count(*details, "cached_tokens");
    }
  }
  return result;
}

std::string vllm_decode_body(std::string_view body, std::string_view kv_transfer_params) {
  auto request = parse_object(body);
  auto params = Json::parse(kv_transfer_params, nullptr, false);
  if (params.is_object()) {
    request["kv_transfer_params"] = std::move(params);
  }
  return request.dump(-1, ' ', false, Json::error_handler_t::replace);
}

std::string sglang_pd_body(std::string_view body, std::string_view bootstrap_host, std::uint16_t bootstrap_port,
                           std::uint64_t bootstrap_room) {
  auto request = parse_object(body);
  request["bootstrap_host"] = bootstrap_host;
  request["bootstrap_port"] = bootstrap_port;
  request["bootstrap_room"] = bootstrap_room;
  return request.dump(-1, ' ', false, Json::error_handler_t::replace);
}

}  // namespace kvgate::openai
