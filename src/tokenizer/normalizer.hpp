#pragma once
// tokenizer.json "normalizer": rewrites a section of input text before it is
// pre-tokenized. Supported types: NFC, NFD, NFKC, NFKD (utf8proc), Replace
// (string or regex), Prepend, Lowercase, Strip, Sequence.
#include <memory>
#include <string>

#include <nlohmann/json_fwd.hpp>

namespace kvgate::tokenizer {

class Normalizer {
 public:
  virtual ~Normalizer() = default;
  // `text` is valid UTF-8 and stays so.
  virtual void normalize(std::string& text) const = 0;
};

class Regex;

// A tokenizer.json pattern: {"String": literal} or {"Regex": Oniguruma}.
Regex pattern_from_spec(const nlohmann::json& pattern);

// nullptr for a null spec; throws TokenizerLoadError for unknown types.
std::unique_ptr<Normalizer> make_normalizer(const nlohmann::json& spec);

}  // namespace kvgate::tokenizer
