#pragma once
// Encoded sections of text (the text between special tokens: in a chat, a
// message body), shared by every thread encoding with one tokenizer, so a
// conversation's next turn finds its earlier turns whichever thread serves
// it. Sharded by key; each shard keeps its own least-recently-used order
// and byte budget, behind its own mutex held only to look up or insert.
// Keyed by the text itself (its hash finds it, the stored text confirms
// it), so a hit is always exact.
#include <array>
#include <cstdint>
#include <list>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "flat_tables.hpp"

namespace kvgate::tokenizer {

class SegmentCache {
 public:
  explicit SegmentCache(std::size_t capacity_bytes) : shard_capacity_(capacity_bytes / kShards) {}

  // Appends the ids of `text` (encoded as a first or a later section) to
  // `out`; false when absent.
  bool append(std::string_view text, bool first_section, std::vector<TokenId>& out);
  void insert(std::string_view text, bool first_section, std::vector<TokenId> ids);
  [[nodiscard]] bool enabled() const { return shard_capacity_ > 0; }

 private:
  static constexpr std::size_t kShards = 16;
  struct Entry {
    std::uint64_t key;
    std::string text;
    std::vector<TokenId> ids;
    [[nodiscard]] std::size_t bytes() const { return text.size() + ids.size() * sizeof(TokenId) + 64; }
  };
  struct Shard {
    std::mutex mutex;
    std::size_t used_bytes = 0;
    std::list<Entry> recency;  // most recent first
    std::unordered_map<std::uint64_t, std::list<Entry>::iterator> by_key;
  };
  static std::uint64_t key_of(std::string_view text, bool first_section) {
    return hash_bytes(text) ^ (first_section ? 0x9E3779B97F4A7C15ULL : 0);
  }
  Shard& shard_of(std::uint64_t key) { return shards_[(key >> 59) % kShards]; }

  std::size_t shard_capacity_;
  std::array<Shard, kShards> shards_;
};

}  // namespace kvgate::tokenizer
