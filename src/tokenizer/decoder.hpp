#pragma once
// tokenizer.json "decoder": token strings back to text, for debugging, the
// CLI and round-trip tests (routing never decodes). Supported types:
// ByteLevel, Replace, ByteFallback, Fuse, Strip, Metaspace, BPEDecoder,
// Sequence. Behaviour follows the reference JavaScript tokenizer.
#include <memory>
#include <string>
#include <unordered_set>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace kvgate::tokenizer {

class Decoder {
 public:
  virtual ~Decoder() = default;
  virtual void decode_chain(std::vector<std::string>& tokens) const = 0;
};

// `added_tokens`: contents ByteLevel passes through unmapped.
std::unique_ptr<Decoder> make_decoder(const nlohmann::json& spec,
                                      std::shared_ptr<const std::unordered_set<std::string>> added_tokens);

}  // namespace kvgate::tokenizer
