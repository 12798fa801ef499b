#pragma once
// The parts of a loaded tokenizer, shared by its loader and its encoder.
#include <memory>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include <nlohmann/json.hpp>

#include "added_tokens.hpp"
#include "bpe.hpp"
#include "decoder.hpp"
#include "kvgate/tokenizer/hf_tokenizer.hpp"
#include "normalizer.hpp"
#include "pre_tokenizer.hpp"
#include "regex.hpp"
#include "segment_cache.hpp"

namespace kvgate::tokenizer {

struct EncodeWorkspace::State {
  MatchScratch match;
  std::vector<Section> sections;
  // BPE buffers and word cache per tokenizer (by Impl::instance), since
  // the same word encodes differently with different vocabularies.
  std::vector<std::pair<std::uint64_t, std::unique_ptr<BpeScratch>>> bpe;
  BpeScratch& bpe_for(std::uint64_t instance) {
    for (auto& [owner, scratch] : bpe) {
      if (owner == instance) return *scratch;
    }
    bpe.emplace_back(instance, std::make_unique<BpeScratch>());
    return *bpe.back().second;
  }
};

// Token strings by id in one arena (a vector of std::string would cost 32
// bytes per token before any text).
class TokenStrings {
 public:
  void resize(std::size_t count) { spans_.resize(count, {0, 0}); }
  void set(TokenId id, std::string_view text) {
    if (spans_.size() <= id) spans_.resize(static_cast<std::size_t>(id) + 1, {0, 0});
    spans_[id] = {static_cast<std::uint32_t>(arena_.size()), static_cast<std::uint32_t>(text.size())};
    arena_.append(text);
  }
  [[nodiscard]] std::string_view get(TokenId id) const {
    if (id >= spans_.size()) return {};
    return std::string_view(arena_).substr(spans_[id].first, spans_[id].second);
  }
  [[nodiscard]] std::size_t size() const { return spans_.size(); }
  [[nodiscard]] std::size_t memory_bytes() const { return arena_.capacity() + spans_.capacity() * sizeof(spans_[0]); }

 private:
  std::string arena_;
  std::vector<std::pair<std::uint32_t, std::uint32_t>> spans_;  // offset, length
};

struct Tokenizer::Impl {
  std::uint64_t instance = 0;  // unique per loaded tokenizer, never reused
  std::unique_ptr<SegmentCache> segments;
  std::unique_ptr<Normalizer> normalizer;
  std::unique_ptr<PreTokenizer> pre_tokenizer;
  std::unique_ptr<BpeModel> model;
  std::unique_ptr<Decoder> decoder;
  bool fuse_unknown = false;

  std::vector<AddedToken> added;
  // Looked up with the section's view: no string is built per section.
  struct ContentHash {
    using is_transparent = void;
    std::size_t operator()(std::string_view content) const { return std::hash<std::string_view>{}(content); }
  };
  // raw and normalised contents -> index in `added`
  std::unordered_map<std::string, int, ContentHash, std::equal_to<>> added_by_content;
  std::size_t longest_added = 0;  // bytes of the longest key above
  AddedTokenSplitter unnormalized_splitter;
  AddedTokenSplitter normalized_splitter;

  // add_special_tokens: ids around a single sequence (post-processor).
  std::vector<TokenId> prefix_ids;
  std::vector<TokenId> suffix_ids;

  TokenStrings id_to_token;  // the file's alphabet, for decoding
  std::unordered_set<std::string> special_contents;
  std::string unknown_token;
  nlohmann::json config;
  std::size_t vocabulary_size = 0;
};

struct TokenizerFile;
// Builds the tokenizer from its parsed tokenizer.json; in loader.cpp.
std::shared_ptr<Tokenizer::Impl> build_tokenizer(const TokenizerFile& file, std::string_view config_json,
                                                 const LoadOptions& options);

}  // namespace kvgate::tokenizer
