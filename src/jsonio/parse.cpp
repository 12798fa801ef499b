#include "kvgate/jsonio/parse.hpp"

#include "kvgate/jsonio/from_simdjson.hpp"

namespace kvgate::jsonio {

namespace {

// One parser per thread keeps its buffers from call to call (parse.hpp,
// kKeptParserBytes); it holds nothing else between calls.
simdjson::dom::parser& kept_parser() {
  thread_local simdjson::dom::parser parser;
  return parser;
}

template <typename Json>
std::optional<Json> parse_with_simdjson(std::string_view text) {
  std::optional<simdjson::dom::parser> own;
  auto& parser = text.size() <= kKeptParserBytes ? kept_parser() : own.emplace();
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

std::size_t kept_parser_capacity() {
  return kept_parser().capacity();
}

std::optional<nlohmann::ordered_json> parse_ordered(std::string_view text) {
  return parse_with_simdjson<nlohmann::ordered_json>(text);
}

std::optional<nlohmann::json> parse(std::string_view text) {
  return parse_with_simdjson<nlohmann::json>(text);
}

}  // namespace kvgate::jsonio
