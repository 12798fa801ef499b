// Arbitrary bytes as a request body: inspection returns a summary or an
// OpenAI error, never crashes, and an error is always a 4xx with a body.
// An accepted body salted for tenant isolation parses to exactly one
// top-level cache_salt, the tenant's (a second one would let a client's
// salt win in engines that keep the last duplicate). The fast parser
// (jsonio: simdjson, then nlohmann where it refuses) accepts exactly what
// nlohmann's parser accepts, with the same document.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "kvgate/core/trace_context.hpp"
#include "kvgate/jsonio/parse.hpp"
#include "kvgate/openai/request.hpp"

#include <nlohmann/json.hpp>

namespace {

void check_salted(std::string_view body, const kvgate::openai::RequestSummary& summary) {
  constexpr std::string_view kSalt = "kvgate-tenant";
  auto salted = kvgate::openai::with_cache_salt(body, kSalt, summary.has_cache_salt_member);
  int members = 0;
  auto count = [&](int depth, nlohmann::json::parse_event_t event, nlohmann::json& parsed) {
    if (depth == 1 && event == nlohmann::json::parse_event_t::key && parsed == "cache_salt") {
      ++members;
    }
    return true;
  };
  auto document = nlohmann::json::parse(salted, count, /*allow_exceptions=*/false);
  if (!document.is_object() || members != 1 || document["cache_salt"] != kSalt) {
    __builtin_trap();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view body(reinterpret_cast<const char*>(data), size);
  {
    auto fast = kvgate::jsonio::parse_ordered(body);
    auto reference = nlohmann::ordered_json::parse(body, nullptr, /*allow_exceptions=*/false);
    // NaN never comes out of JSON text, so == compares the documents fully.
    if (fast.has_value() == reference.is_discarded() || (fast && *fast != reference)) {
      __builtin_trap();
    }
  }
  // The same bytes as a traceparent header: a valid one has exactly hex ids.
  if (auto trace = kvgate::parse_traceparent(body)) {
    for (char c : trace->trace_id) {
      if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) {
        __builtin_trap();
      }
    }
  }
  static const auto sources = kvgate::config::default_session_key_sources();
  kvgate::openai::SessionKeyInput keys{sources, {}};
  keys.header_values[0] = size % 2 == 0 ? "" : "session";
  for (auto endpoint : {kvgate::openai::Endpoint::chat_completions, kvgate::openai::Endpoint::completions}) {
    auto result = kvgate::openai::inspect_request(body, endpoint, keys);
    if (!result) {
      const auto& error = result.error();
      if (error.status < 400 || error.status >= 500 || error.message.empty()) {
        __builtin_trap();
      }
      (void)kvgate::openai::error_body(error);
    } else {
      check_salted(body, *result);
    }
  }
  return 0;
}
