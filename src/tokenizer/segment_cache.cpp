#include "segment_cache.hpp"

namespace kvgate::tokenizer {

const std::vector<TokenId>* SegmentCache::find(std::string_view text, bool first_section) {
  auto found = by_key_.find(key_of(text, first_section));
  if (found == by_key_.end() || found->second->text != text) {
    ++misses_;
    return nullptr;
  }
  ++hits_;
  recency_.splice(recency_.begin(), recency_, found->second);
  return &found->second->ids;
}

void SegmentCache::insert(std::string_view text, bool first_section, std::vector<TokenId> ids) {
  Entry entry{key_of(text, first_section), std::string(text), std::move(ids)};
  if (entry.bytes() > capacity_bytes_) return;
  if (auto existing = by_key_.find(entry.key); existing != by_key_.end()) {
    used_bytes_ -= existing->second->bytes();
    recency_.erase(existing->second);
    by_key_.erase(existing);
  }
  while (used_bytes_ + entry.bytes() > capacity_bytes_ && !recency_.empty()) {
    used_bytes_ -= recency_.back().bytes();
    by_key_.erase(recency_.back().key);
    recency_.pop_back();
  }
  used_bytes_ += entry.bytes();
  recency_.push_front(std::move(entry));
  by_key_[recency_.front().key] = recency_.begin();
}

}  // namespace kvgate::tokenizer
