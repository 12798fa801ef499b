#pragma once
// Finds added tokens (special tokens such as <|im_start|>) in text. At each
// position the longest token starting there wins; text between tokens is
// returned as plain sections. Mirrors the reference tokenizer's dictionary
// splitter: a byte trie with a direct first-byte table so plain text costs
// one array read per byte.
#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace kvgate::tokenizer {

struct Section {
  std::string_view text;
  int token = -1;  // index into the splitter's tokens, -1 for plain text
};

class AddedTokenSplitter {
 public:
  void add(std::string_view content, int token);
  [[nodiscard]] bool empty() const { return nodes_.size() <= 1; }
  // Appends the sections of `text` to `out`.
  void split(std::string_view text, std::vector<Section>& out) const;

 private:
  struct Node {
    int token = -1;  // token ending here
    // Children below the root, few per node: a linear scan of a small
    // vector beats hashing, and stays compact for tokenizers with thousands
    // of added tokens.
    std::vector<std::pair<unsigned char, int>> children;
  };
  [[nodiscard]] int child(int node, unsigned char byte) const;

  std::vector<Node> nodes_{Node{}};
  std::array<int, 256> root_children_{};  // 0 = none (the root is never a child)
  // The tokens' distinct first bytes, while there are few: plain text is
  // then skipped with one memchr per byte instead of a table read per
  // position (Gemma 3's 6,415 added tokens start with one of five bytes,
  // '\n' among them).
  static constexpr std::size_t kScannedFirstBytes = 8;
  std::array<unsigned char, kScannedFirstBytes> first_byte_list_{};
  std::size_t first_bytes_ = 0;
};

}  // namespace kvgate::tokenizer
