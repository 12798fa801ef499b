#pragma once
// JSON text into nlohmann documents, read by simdjson: a long chat body (a
// 128k-token conversation is about 500 kB) in a fraction of the time of
// nlohmann's own parser, whose lexer takes long strings a character at a
// time. What is accepted is
// exactly what nlohmann accepts: where simdjson refuses text (integers beyond
// 64 bits, a leading byte-order mark, and every malformed text) nlohmann's
// parser decides. Both refuse invalid UTF-8 and unpaired surrogate escapes.
#include <cstddef>
#include <nlohmann/json.hpp>
#include <optional>
#include <string_view>

namespace kvgate::jsonio {

// nullopt: not JSON (nlohmann's verdict).
std::optional<nlohmann::ordered_json> parse_ordered(std::string_view text);
std::optional<nlohmann::json> parse(std::string_view text);

// Each thread keeps one parser whose buffers (a padded copy of the text and
// its tape, several times the text's size) stay sized to the longest text
// it read. A text longer than this is read by a parser of its own, freed
// when the call returns, so that one large body (up to max_body_bytes)
// does not pin that much memory on every I/O thread for the life of the
// process. 4 MiB keeps a 128k-token chat (about 500 kB) on the kept parser.
inline constexpr std::size_t kKeptParserBytes = std::size_t{4} << 20;
// The text length the calling thread's kept parser is sized for.
std::size_t kept_parser_capacity();

}  // namespace kvgate::jsonio
