#pragma once
// JSON text into nlohmann documents, read by simdjson: on a 500 kB chat body
// (a 128k-token conversation) 124 us against nlohmann's own parser's 2.5 ms,
// whose lexer takes long strings a character at a time. What is accepted is
// exactly what nlohmann accepts: where simdjson refuses text (integers beyond
// 64 bits, a leading byte-order mark, and every malformed text) nlohmann's
// parser decides. Both refuse invalid UTF-8 and unpaired surrogate escapes.
#include <nlohmann/json.hpp>
#include <optional>
#include <string_view>

namespace kvgate::jsonio {

// nullopt: not JSON (nlohmann's verdict).
std::optional<nlohmann::ordered_json> parse_ordered(std::string_view text);
std::optional<nlohmann::json> parse(std::string_view text);

}  // namespace kvgate::jsonio
