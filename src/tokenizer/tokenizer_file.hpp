#pragma once
// Reads tokenizer.json with simdjson: its two large members, model.vocab and
// model.merges, become views into the parser's string buffer (no string per
// token: a 262k-token vocabulary with 514k merges would be 1.3M allocations);
// everything else, a few kB, becomes an ordinary json value for the loader.
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "bpe.hpp"

namespace kvgate::tokenizer {

struct TokenizerFile {
  nlohmann::json document;              // tokenizer.json without model.vocab and model.merges
  VocabularyEntries vocabulary;         // views into `storage`
  MergeEntries merges;                  // both file forms ("a b" and ["a", "b"]); views into `storage`
  std::shared_ptr<const void> storage;  // the parsed document the views point into
};

// Throws TokenizerLoadError with the parser's message on malformed input.
// The text is copied into a buffer with simdjson's padding first.
TokenizerFile parse_tokenizer_file(std::string_view text);
// Reads and parses `path` in one buffer: a 32 MB tokenizer.json read, then
// copied for the padding, faulted in 64 MB of fresh pages, a tenth of
// Gemma 3's load.
TokenizerFile read_tokenizer_file(const std::string& path);

}  // namespace kvgate::tokenizer
