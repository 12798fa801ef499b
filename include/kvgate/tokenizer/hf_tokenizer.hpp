#pragma once
// A Hugging Face tokenizer (tokenizer.json + tokenizer_config.json), encoding
// text to the same ids as the engines' `tokenizers` library: added-token
// splitting with lstrip/rstrip, normalizer, pre-tokenizer, BPE (byte-level or
// with byte fallback), post-processor. Loading throws (start-up only);
// encoding returns errors as values and is safe from many threads at once,
// each with its own EncodeWorkspace.
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "kvgate/core/result.hpp"
#include "kvgate/core/token.hpp"

namespace kvgate::tokenizer {

class TokenizerLoadError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct AddedToken {
  std::string content;
  TokenId id = 0;
  bool special = false;
  bool lstrip = false;      // whitespace before it is dropped
  bool rstrip = false;      // whitespace after it is dropped
  bool normalized = false;  // matched after normalisation rather than before
};

// Per-thread reusable state: regex match data, BPE buffers and, per
// tokenizer it has encoded with, a cache of encoded words. Not shared
// between threads; one workspace may serve several tokenizers.
class EncodeWorkspace {
 public:
  EncodeWorkspace();
  ~EncodeWorkspace();
  EncodeWorkspace(const EncodeWorkspace&) = delete;
  EncodeWorkspace& operator=(const EncodeWorkspace&) = delete;

  [[nodiscard]] std::uint64_t word_cache_hits() const;
  [[nodiscard]] std::uint64_t word_cache_misses() const;
  // Long words this workspace encoded with the backtracking encoder (the
  // rest went through the pair-by-pair merge).
  [[nodiscard]] std::uint64_t backtracked_words() const;
  // Sections of this thread's prompts found in, or added to, the
  // tokenizers' segment caches.
  [[nodiscard]] std::uint64_t segment_cache_hits() const { return segment_hits_; }
  [[nodiscard]] std::uint64_t segment_cache_misses() const { return segment_misses_; }

  struct State;
  State& state() { return *state_; }
  void count_segment(bool hit) { ++(hit ? segment_hits_ : segment_misses_); }

 private:
  std::unique_ptr<State> state_;
  std::uint64_t segment_hits_ = 0;
  std::uint64_t segment_misses_ = 0;
};

struct LoadOptions {
  // Memory for the tokenizer's segment cache: sections (text between
  // special tokens) and their ids, shared by all threads. A chat's earlier
  // turns are sections seen before, so turn N+1 encodes only what is new.
  // 0 turns it off.
  std::size_t segment_cache_bytes = 64u << 20;
  // Words over 48 bytes are encoded left to right by the backtracking
  // encoder (linear time; same ids). False keeps them on the pair-by-pair
  // merge: for comparing the two in tests and benchmarks.
  bool backtracking_encoder = true;
};

struct DecodeOptions {
  bool skip_special_tokens = false;
};

class Tokenizer {
 public:
  // Reads DIR/tokenizer.json and DIR/tokenizer_config.json (the latter may
  // be absent).
  static Tokenizer load_folder(const std::string& folder, LoadOptions options = {});
  static Tokenizer load(std::string_view tokenizer_json, std::string_view tokenizer_config_json,
                        LoadOptions options = {});

  // Appends the ids of `text` to `ids`. Fails only on invalid UTF-8, which
  // it checks unless the caller vouches for the text (`known_valid`, e.g. a
  // prompt rendered from parsed JSON strings and template literals).
  Result<bool, std::string> encode(std::string_view text, bool add_special_tokens, EncodeWorkspace& workspace,
                                   std::vector<TokenId>& ids, bool known_valid = false) const;
  [[nodiscard]] std::string decode(std::span<const TokenId> ids, DecodeOptions options = {}) const;

  [[nodiscard]] std::optional<TokenId> token_to_id(std::string_view token) const;
  [[nodiscard]] const std::vector<AddedToken>& added_tokens() const;
  // tokenizer_config.json as loaded (chat_template, bos_token, eos_token, ...).
  [[nodiscard]] const nlohmann::json& config() const;
  [[nodiscard]] std::size_t vocabulary_size() const;
  [[nodiscard]] std::size_t memory_bytes() const;
  // Builds the backtracking encoder's tables now rather than on the first
  // word over 48 bytes (0.1-0.4 s on the large vocabularies), or waits for
  // the thread building them: for callers that load before they serve.
  // (Without it, long words that other threads encode during that first
  // build are merged pair by pair meanwhile: the same ids, no wait.)
  void prepare_long_words() const;

  struct Impl;

 private:
  explicit Tokenizer(std::shared_ptr<const Impl> impl) : impl_(std::move(impl)) {}
  std::shared_ptr<const Impl> impl_;  // immutable; copies share it
};

}  // namespace kvgate::tokenizer
