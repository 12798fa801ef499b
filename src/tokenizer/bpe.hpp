#pragma once
// The BPE model: a word's symbols are merged pair by pair, lowest merge rank
// first and leftmost among equals, until no listed pair remains (Hugging
// Face tokenizers' BPE without dropout). Then ids are looked up, with byte
// fallback (<0xXX> tokens) or the unknown token for symbols outside the
// vocabulary.
//
// Byte-level vocabularies (GPT-2 style) are stored in raw bytes: every token
// string is mapped back through GPT-2's byte<->character table at load, so a
// word's initial symbols are its bytes and nothing is mapped per request.
// Other vocabularies start from the word's code points.
#include <array>
#include <atomic>
#include <bit>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "backtrack.hpp"
#include "flat_tables.hpp"

namespace kvgate::tokenizer {

struct BpeOptions {
  bool byte_level = false;
  bool byte_fallback = false;
  bool ignore_merges = false;  // a word that is itself a token is emitted whole
  bool backtracking = true;    // long words through BacktrackingEncoder (same ids, linear time)
  TokenId unknown = kNoToken;
};

// A tokenizer file's vocabulary (token, id) and merges (left, right), in its
// own alphabet, as views into the parsed file.
using VocabularyEntries = std::vector<std::pair<std::string_view, TokenId>>;
using MergeEntries = std::vector<std::pair<std::string_view, std::string_view>>;

class WordCache;
class MergeQueue;
struct BpeScratch;

class BpeModel {
 public:
  // `vocabulary` and `merges` in the file's alphabet (byte-level ones are
  // converted here). Merges naming tokens outside the vocabulary are skipped.
  BpeModel(const VocabularyEntries& vocabulary, const MergeEntries& merges, BpeOptions options);

  // Appends the ids of `word` (model alphabet: raw bytes for byte-level).
  void encode_word(std::string_view word, std::vector<TokenId>& out, BpeScratch& scratch) const;
  // The same by the pair-by-pair merge alone, without the word cache: the
  // reference the backtracking encoder is checked against.
  void merge_word(std::string_view word, std::vector<TokenId>& out, BpeScratch& scratch) const;
  // The backtracking encoder, built by the first call; nullptr when this
  // merge list does not allow it (or options().backtracking is off), and
  // while another thread builds it: a long word arriving then is merged
  // pair by pair (the same ids) rather than held for the build (0.1-0.2 s
  // on large vocabularies).
  [[nodiscard]] const BacktrackingEncoder* backtracking() const;
  // Builds the encoder now, or waits for the thread that is building it.
  void prepare_backtracking() const;

  // Raw-alphabet lookup of a whole token (kNoToken when absent).
  [[nodiscard]] TokenId find(std::string_view token) const { return vocabulary_.find(token); }
  void add_token(std::string_view token, TokenId id) { vocabulary_.insert(token, id); }
  [[nodiscard]] const BpeOptions& options() const { return options_; }
  // The backtracking encoder's tables count once they are built.
  [[nodiscard]] std::size_t memory_bytes() const;
  [[nodiscard]] std::size_t merge_count() const { return merge_count_; }

 private:
  using Symbol = struct BpeSymbol;
  void initial_symbols(std::string_view word, std::vector<Symbol>& symbols) const;
  void merge_small(std::vector<Symbol>& symbols, std::vector<Merge>& pairs, PairMemo& memo) const;
  void merge_large(std::vector<Symbol>& symbols, MergeQueue& queue) const;
  void emit(std::string_view word, const std::vector<Symbol>& symbols, std::vector<TokenId>& out) const;
  void encode_piece(std::string_view word, std::vector<TokenId>& out, BpeScratch& scratch) const;
  void merge_symbols(std::string_view word, BpeScratch& scratch) const;
  bool encode_backtracking(const BacktrackingEncoder& fast, std::string_view word, std::vector<TokenId>& out,
                           BpeScratch& scratch) const;
  [[nodiscard]] std::unique_ptr<BacktrackingEncoder> build_backtracking() const;
  void find_word_boundaries(const VocabularyEntries& vocabulary);
  [[nodiscard]] bool splits_before(std::string_view word, std::size_t position) const;

  // SentencePiece-style vocabularies (Gemma's) mark a word's start with
  // U+2581 and have no pre-tokenizer split, so a whole paragraph is one
  // word. When almost no token holds the marker after another character, no
  // merge can join the text before a marker with the marker: the word is
  // encoded piece by piece, each starting at a marker, with the same result
  // in linear time and through the word cache. `bridges_` are the few tokens
  // that do (with the marker's offset in them): no split where one of them
  // occurs.
  bool split_at_markers_ = false;

  std::vector<std::pair<std::string, std::size_t>> bridges_;

  StringTable vocabulary_;
  PairTable merges_;
  std::size_t merge_count_ = 0;
  BpeOptions options_;
  TokenId byte_tokens_[256]{};  // byte-level: each byte's token; else the <0xXX> fallback tokens

  // Built by the first long word, after the added tokens are in: tens of
  // milliseconds on large vocabularies, which processes that never see a
  // long word do not pay at load. One thread builds; `backtracking_` is
  // written before the state turns kDone (release) and read after it is
  // seen (acquire).
  enum class BuildState : std::uint8_t { kNotStarted, kBuilding, kDone };
  mutable std::atomic<BuildState> backtracking_state_{BuildState::kNotStarted};
  mutable std::unique_ptr<BacktrackingEncoder> backtracking_;
};

// GPT-2's reversible byte <-> character table (printable bytes map to
// themselves, the rest to U+0100 onwards).
char32_t byte_to_unicode(std::uint8_t byte);
// -1 when `code_point` is not in the table.
int unicode_to_byte(char32_t code_point);
// A byte-level token string back to raw bytes; nullopt if it has a character
// outside the table.
std::optional<std::string> byte_level_to_raw(std::string_view token);
// The same into `raw` (replacing its contents, keeping its capacity); false
// on a character outside the table.
bool byte_level_to_raw(std::string_view token, std::string& raw);

// Per-thread memo of encoded words (most words repeat). Bounded: when full
// it starts again empty, which keeps the hot path free of eviction work.
class WordCache {
 public:
  explicit WordCache(std::size_t slots = 1 << 16);
  static constexpr std::size_t kLongestWord = 255;  // longer words are neither kept nor looked up
  // nullptr when absent; `count` receives the number of ids.
  const TokenId* find(std::string_view word, std::uint64_t hash, std::size_t& count) const;
  void insert(std::string_view word, std::uint64_t hash, const TokenId* ids, std::size_t count);
  [[nodiscard]] std::uint64_t hits() const { return hits_; }
  [[nodiscard]] std::uint64_t misses() const { return misses_; }
  void count_hit() { ++hits_; }
  void count_miss() { ++misses_; }

 private:
  // 12 bytes, so that the table's probes touch little memory. Words are
  // under 256 bytes (kCacheableLength) and give at most as many ids.
  struct Slot {
    std::uint32_t tag = 0;          // the hash's high half (its low bits pick the slot)
    std::uint32_t offset = 0;       // of the entry in entries_
    std::uint16_t word_length = 0;  // 0: an empty slot (no word is empty)
    std::uint16_t ids_count = 0;
  };
  void clear();

  std::vector<Slot> slots_;
  // One entry per word: its ids, then its bytes packed four to an element,
  // so that a hit reads one place after the slot.
  std::vector<TokenId> entries_;
  std::size_t used_ = 0;
  std::uint64_t hits_ = 0;
  std::uint64_t misses_ = 0;
};

struct BpeSymbol {
  TokenId id;
  std::uint32_t begin;   // byte offset in the word
  std::uint32_t length;  // bytes; 0 once merged into its left neighbour
  std::int32_t previous;
  std::int32_t next;
};

// The long-word merge queue of 64-bit keys ((rank << 32) | position): a
// radix heap (Ahuja, Mehlhorn, Orlin and Tarjan, 1990) over the ranks for
// keys above the rank being taken, and a binary heap for the rest. In a
// merge list learned in order a merge only makes candidates of higher rank,
// so nearly every key is a radix key: pushes append, and each key moves
// down at most once per bit of its rank in sequential passes, where a
// binary heap of a long word's ~100,000 candidates sifts through memory
// that does not fit the cache. The buckets go by rank alone: a rank's
// candidates (a run of one character makes thousands) reach bucket 0
// together and are sorted there by position once. Keyed by position too,
// they were passed down bucket by bucket through the position's bits, most
// of the merge on Gemma 3's runs of whitespace.
// Lists converted from tiktoken ranks also name pairs whose inputs appear
// later (Llama 3.1: 49,630 of 280,147): those keys go to the binary heap,
// as does a key of the rank being taken once taking has begun (a merge
// never makes its own rank's pair, a token being longer than its inputs,
// so only such a late merge does).
// The buckets keep their capacity from word to word.
class MergeQueue {
 public:
  [[nodiscard]] bool empty() const { return radix_size_ == 0 && late_.empty(); }
  void push(std::uint64_t key);
  std::uint64_t pop();  // the smallest key; the queue must not be empty
  void clear();

 private:
  // The highest bit where `key`'s rank differs from last_'s, plus one; 0 if
  // they are equal.
  [[nodiscard]] std::size_t bucket_of(std::uint64_t key) const {
    const std::uint64_t differ = (key ^ last_) >> 32;
    return differ == 0 ? 0 : 64 - static_cast<std::size_t>(std::countl_zero(differ));
  }
  // buckets_[0]: keys of last_'s rank, sorted from the highest.
  std::array<std::vector<std::uint64_t>, 33> buckets_;
  std::vector<std::uint64_t> late_;  // a min-heap of keys pushed below last_ or of its rank
  std::uint64_t last_ = 0;
  std::size_t radix_size_ = 0;
  bool taking_ = false;  // popped from since the last clear: buckets_[0] is sorted
};

// Reused buffers of one encoding thread.
struct BpeScratch {
  std::vector<BpeSymbol> symbols;
  std::vector<Merge> pairs;
  PairMemo pair_memo;
  MergeQueue queue;
  WordCache cache;
  BacktrackScratch backtrack;
};

}  // namespace kvgate::tokenizer
