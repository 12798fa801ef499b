#include "segment_cache.hpp"

namespace kvgate::tokenizer {

bool SegmentCache::append(std::string_view text, bool first_section, std::vector<TokenId>& out) {
  std::uint64_t key = key_of(text, first_section);
  Shard& shard = shard_of(key);
  std::lock_guard lock(shard.mutex);
  auto found = shard.by_key.find(key);
  if (found == shard.by_key.end() || found->second->text != text) {
    return false;
  }
  shard.recency.splice(shard.recency.begin(), shard.recency, found->second);
  out.insert(out.end(), found->second->ids.begin(), found->second->ids.end());
  return true;
}

void SegmentCache::insert(std::string_view text, bool first_section, std::vector<TokenId> ids) {
  Entry entry{key_of(text, first_section), std::string(text), std::move(ids)};
  if (entry.bytes() > shard_capacity_) {
    return;
  }
  Shard& shard = shard_of(entry.key);
  std::lock_guard lock(shard.mutex);
  if (auto existing = shard.by_key.find(entry.key); existing != shard.by_key.end()) {
    shard.used_bytes -= existing->second->bytes();
    shard.recency.erase(existing->second);
    shard.by_key.erase(existing);
  }
  while (shard.used_bytes + entry.bytes() > shard_capacity_ && !shard.recency.empty()) {
    shard.used_bytes -= shard.recency.back().bytes();
    shard.by_key.erase(shard.recency.back().key);
    shard.recency.pop_back();
  }
  shard.used_bytes += entry.bytes();
  shard.recency.push_front(std::move(entry));
  shard.by_key[shard.recency.front().key] = shard.recency.begin();
}

}  // namespace kvgate::tokenizer
