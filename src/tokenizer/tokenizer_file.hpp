#pragma once
// Reads tokenizer.json without building a DOM for its two large members:
// model.vocab and model.merges stream straight into vectors (a JSON DOM of
// a 250k-token vocabulary costs several times the file in memory and most
// of the load time). Everything else becomes an ordinary json value.
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "flat_tables.hpp"

namespace kvgate::tokenizer {

struct TokenizerFile {
  nlohmann::json document;  // tokenizer.json without model.vocab and model.merges
  std::vector<std::pair<std::string, TokenId>> vocabulary;
  std::vector<std::pair<std::string, std::string>> merges;  // both file forms
};

// Throws TokenizerLoadError with the parser's message on malformed input.
TokenizerFile parse_tokenizer_file(std::string_view text);

}  // namespace kvgate::tokenizer
