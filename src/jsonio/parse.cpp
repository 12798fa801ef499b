#include "kvgate/jsonio/parse.hpp"

#include "kvgate/jsonio/from_simdjson.hpp"

namespace kvgate::jsonio {

namespace {

template <typename Json>
std::optional<Json> parse_with_simdjson(std::string_view text) {
  // One parser per thread keeps its buffers from call to call (a document
  // the size of the last large body); it holds nothing else between calls.
  thread_local simdjson::dom::parser parser;
  simdjson::dom::element root;
  // simdjson reads up to SIMDJSON_PADDING bytes past the text, so it copies
  // the text into its own padded buffer first (realloc_if_needed).
  if (parser.parse(text.data(), text.size(), true).get(root) == simdjson::SUCCESS) {
    return from_simdjson<Json>(root);
  }
  auto document = Json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (document.is_discarded()) {
    return std::nullopt;
  }
  return document;
}

}  // namespace

std::optional<nlohmann::ordered_json> parse_ordered(std::string_view text) {
  return parse_with_simdjson<nlohmann::ordered_json>(text);
}

std::optional<nlohmann::json> parse(std::string_view text) {
  return parse_with_simdjson<nlohmann::json>(text);
}

}  // namespace kvgate::jsonio
