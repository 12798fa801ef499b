#pragma once
// Encoded sections of text, least recently used dropped first once their
// text and ids exceed the byte budget. Keyed by the text itself (its hash
// finds it, the stored text confirms it), so a hit is always exact.
#include <cstdint>
#include <list>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "flat_tables.hpp"

namespace kvgate::tokenizer {

class SegmentCache {
 public:
  explicit SegmentCache(std::size_t capacity_bytes) : capacity_bytes_(capacity_bytes) {}

  // The ids of `text` encoded as a first (or later) section; nullptr if absent.
  const std::vector<TokenId>* find(std::string_view text, bool first_section);
  void insert(std::string_view text, bool first_section, std::vector<TokenId> ids);

  [[nodiscard]] bool enabled() const { return capacity_bytes_ > 0; }
  [[nodiscard]] std::uint64_t hits() const { return hits_; }
  [[nodiscard]] std::uint64_t misses() const { return misses_; }

 private:
  struct Entry {
    std::uint64_t key;
    std::string text;
    std::vector<TokenId> ids;
    [[nodiscard]] std::size_t bytes() const { return text.size() + ids.size() * sizeof(TokenId) + 64; }
  };
  static std::uint64_t key_of(std::string_view text, bool first_section) {
    return hash_bytes(text) ^ (first_section ? 0x9E3779B97F4A7C15ULL : 0);
  }

  std::size_t capacity_bytes_;
  std::size_t used_bytes_ = 0;
  std::list<Entry> recency_;  // most recent first
  std::unordered_map<std::uint64_t, std::list<Entry>::iterator> by_key_;
  std::uint64_t hits_ = 0;
  std::uint64_t misses_ = 0;
};

}  // namespace kvgate::tokenizer
