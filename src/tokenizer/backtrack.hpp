#pragma once
// Linear-time BPE for long words: the backtracking encoder of GitHub's `bpe`
// crate (Neubeck and van Antwerpen, 2024), rebuilt over Hugging Face merge
// lists.
//
// Merging a word pair by pair touches its symbols in rank order at random
// positions; a 100 kB word runs at a few MB/s however the queue is kept.
// The backtracking encoder walks the word left to right instead: at each
// position it takes the longest token that starts there and keeps it if BPE
// would leave it beside its left neighbour (`compatible`); otherwise it
// tries that token's next shorter prefix token, and when none is left it
// steps back one token. A position from which no compatible continuation
// exists is remembered, so each position is abandoned at most once.
//
// `compatible(a, b)` replays, from the top down, how BPE would build `a`
// then `b` from their bytes and asks whether any merge across the boundary
// comes first. That needs each token's one way of being built (its last
// merge, when BPE is run on the token's own text), which `build` derives in
// merge order. Tokens BPE never outputs for their own text are not matched.
//
// Some merge lists name pairs before their inputs exist (Llama 3.1's,
// converted from tiktoken ranks: 49,630 of 280,147; Gemma 3's, ordered by
// SentencePiece score: a run of 31 U+2581 is merge 1, two of them merge
// 1393). Such a merge fires as soon as its inputs are made, not at its
// rank, which the replay does not follow. Where that is the only way BPE
// makes a token it outputs (Llama 3.1: 222 tokens; Gemma 3: 1,410, mostly
// whitespace runs), a word holding that token's text is merged the
// ordinary way; with more than `kMaxUnplaced` such tokens `build` declines.
#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string_view>
#include <vector>

#include "flat_tables.hpp"

namespace kvgate::tokenizer {

struct BacktrackScratch {
  std::vector<TokenId> tokens;
  std::vector<std::uint64_t> dead;  // bit per byte position: no compatible continuation from here
  // Answers of `compatible` by token pair, direct-mapped, 512k slots (a
  // token pair recurs often, and each answer costs several merge-table probes):
  // ((left << 32 | right) << 1 | answer) + 1, 0 for an empty slot.
  std::vector<std::uint64_t> answers;
  PairMemo merges;          // the replays' merge-table answers
  std::uint64_t words = 0;  // encoded here (not left to the merge)
};

// Byte strings for longest-prefix lookups: a node's children are
// contiguous, their bytes in `labels_` at the same indices (found with
// memchr), built breadth first from the sorted strings.
class ByteTrie {
 public:
  using Entries = std::vector<std::pair<std::string_view, TokenId>>;
  // `entries`: unique strings. `on_entry(id, shorter)` is called for each,
  // with the longest other entry that is a prefix of it (kNoToken if none).
  void build(Entries entries, const std::function<void(TokenId, TokenId)>& on_entry);
  // The longest entry that `text` starts with; kNoToken if none.
  [[nodiscard]] TokenId longest_match(std::string_view text) const;
  [[nodiscard]] bool empty() const { return nodes_.size() <= 1; }
  [[nodiscard]] std::size_t memory_bytes() const {
    return nodes_.capacity() * sizeof(Node) + labels_.capacity() + depth_two_.capacity() * sizeof(std::uint32_t);
  }

 private:
  struct Node {
    std::uint32_t first_child = 0;
    std::uint32_t child_count = 0;
    TokenId token = kNoToken;
    std::uint32_t parent = 0;
  };
  // The child of `node` labelled `byte`; 0 (the root) when there is none.
  [[nodiscard]] std::uint32_t child(std::uint32_t node, unsigned char byte) const;

  std::vector<Node> nodes_{Node{}};  // nodes_[0] is the root
  std::vector<unsigned char> labels_{0};
  // Large tries: the node of every two-byte prefix (first << 8 | second), 0
  // where none; 256 kB.
  std::vector<std::uint32_t> depth_two_;
};

class BacktrackingEncoder {
 public:
  // Tells whether BPE encodes `text` to exactly the one token `id` (the
  // ordinary merge, used to check the tokens `build` cannot place).
  using EncodesToItself = std::function<bool(std::string_view text, TokenId id)>;

  // `vocabulary`: raw-alphabet token strings by id (empty views for ids
  // without a token). `base_tokens`: the word's initial symbols (bytes for
  // byte-level vocabularies, else single characters). Declines with nullptr
  // when the merge list breaks the rank order (see above).
  static std::unique_ptr<BacktrackingEncoder> build(const std::vector<std::string_view>& vocabulary,
                                                    const std::vector<TokenId>& base_tokens, const PairTable& merges,
                                                    const EncodesToItself& encodes_to_itself);

  // Whether `word` holds the text of a token this encoder leaves to the
  // merge (see above); such a word must not be encoded here.
  [[nodiscard]] bool holds_unplaced(std::string_view word) const;
  // Appends the ids BPE gives the longest prefix of `text` that starts no
  // character outside the base tokens, and returns its length in bytes (0
  // when `text` starts with such a character, which BPE never merges: the
  // caller spells it and goes on after it). nullopt, with nothing appended,
  // if the replay finds no answer (a merge list it misreads).
  std::optional<std::size_t> encode_run(std::string_view text, std::vector<TokenId>& out,
                                        BacktrackScratch& scratch) const;
  // The ids of a whole word of base-token characters; false, with nothing
  // appended, for a word holding another character or an unplaced token.
  bool encode(std::string_view word, std::vector<TokenId>& out, BacktrackScratch& scratch) const;

  [[nodiscard]] std::size_t memory_bytes() const;

 private:
  explicit BacktrackingEncoder(const PairTable& merges) : merges_(merges) {}

  static constexpr std::uint32_t kNotMatched = UINT32_MAX;
  static constexpr std::size_t kMaxUnplaced = 4096;
  struct TokenInfo {
    // Creation order: base tokens first, then a merged token at its last
    // merge's rank (offset by the base count). kNotMatched: never output.
    std::uint32_t order = kNotMatched;
    TokenId left = kNoToken;  // the last merge's inputs; the token itself for a base token
    TokenId right = kNoToken;
    TokenId shorter = kNoToken;  // the longest matched token that is a proper prefix of this one
    std::uint32_t length = 0;
  };

  // `memo`: a thread's memo of merge-table answers; nullptr at build.
  [[nodiscard]] bool compatible(TokenId left, TokenId right, std::uint32_t limit, PairMemo* memo) const;
  [[nodiscard]] bool remembered_compatible(TokenId left, TokenId right, BacktrackScratch& scratch) const;

  const PairTable& merges_;
  std::uint32_t base_count_ = 0;
  std::vector<TokenInfo> tokens_;  // by id
  ByteTrie matched_;               // the tokens with an order
  // Tokens BPE outputs for their own text that only a merge listed before
  // its inputs makes (see above). A word holding one of them is left to the
  // merge; `unplaced_first_` has the bytes they start with.
  ByteTrie unplaced_;
  std::array<bool, 256> unplaced_first_{};
};

}  // namespace kvgate::tokenizer
