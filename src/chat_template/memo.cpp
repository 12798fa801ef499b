#include "memo.hpp"

#include <bit>
#include <cstring>

namespace kvgate::chat_template {

namespace {

constexpr std::uint64_t kMultiplier = 0x9E3779B97F4A7C15ull;

std::uint64_t mix(std::uint64_t seed, std::uint64_t value) {
  seed ^= value + kMultiplier + (seed << 6) + (seed >> 2);
  return seed * kMultiplier;
}

// Words of at most a few dozen sampled bytes: cheaper than a general hash.
std::uint64_t hash_bytes(std::string_view bytes) {
  std::uint64_t seed = bytes.size();
  std::size_t at = 0;
  for (; at + sizeof(std::uint64_t) <= bytes.size(); at += sizeof(std::uint64_t)) {
    std::uint64_t word = 0;
    std::memcpy(&word, bytes.data() + at, sizeof word);
    seed = mix(seed, word);
  }
  std::uint64_t rest = 0;
  std::memcpy(&rest, bytes.data() + at, bytes.size() - at);
  return mix(seed, rest);
}

// Ends of strings and the first entries of containers: enough to tell
// messages apart; `identical` decides.
constexpr std::size_t kSampledBytes = 32;
constexpr std::size_t kSampledItems = 8;
constexpr int kSampledDepth = 4;

std::uint64_t fingerprint_at(const Value& value, int depth) {
  std::uint64_t seed = static_cast<std::uint64_t>(value.kind()) + 1;
  switch (value.kind()) {
    case Value::Kind::kUndefined:
    case Value::Kind::kNone:
      return seed;
    case Value::Kind::kBool:
      return mix(seed, value.as_bool() ? 1 : 0);
    case Value::Kind::kInteger:
      return mix(seed, static_cast<std::uint64_t>(value.as_integer()));
    case Value::Kind::kFloat:
      return mix(seed, std::bit_cast<std::uint64_t>(value.as_float()));
    case Value::Kind::kString: {
      std::string_view text = value.as_string();
      seed = mix(seed, text.size());
      if (text.size() <= 2 * kSampledBytes) {
        return mix(seed, hash_bytes(text));
      }
      seed = mix(seed, hash_bytes(text.substr(0, kSampledBytes)));
      return mix(seed, hash_bytes(text.substr(text.size() - kSampledBytes)));
    }
    case Value::Kind::kList: {
      const List& items = value.as_list();
      seed = mix(seed, items.size());
      if (depth >= kSampledDepth) {
        return seed;
      }
      for (std::size_t index = 0; index < items.size() && index < kSampledItems; ++index) {
        seed = mix(seed, fingerprint_at(items[index], depth + 1));
      }
      return seed;
    }
    case Value::Kind::kMapping: {
      const Mapping& entries = value.as_mapping();
      seed = mix(seed, entries.size());
      if (depth >= kSampledDepth) {
        return seed;
      }
      for (std::size_t index = 0; index < entries.size() && index < kSampledItems; ++index) {
        seed = mix(seed, hash_bytes(entries[index].first));
        seed = mix(seed, fingerprint_at(entries[index].second, depth + 1));
      }
      return seed;
    }
    case Value::Kind::kNamespace:
    case Value::Kind::kFunction:
      return seed;
  }
  return seed;
}

// What a record holds on to, for the budget: shared text is counted once per
// record that holds it, which over-counts and so stays within the budget.
std::size_t value_bytes(const Value& value) {
  constexpr std::size_t kValueBytes = sizeof(Value);
  switch (value.kind()) {
    case Value::Kind::kString:
      return kValueBytes + value.as_string().size();
    case Value::Kind::kList: {
      std::size_t total = kValueBytes;
      for (const Value& item : value.as_list()) {
        total += value_bytes(item);
      }
      return total;
    }
    case Value::Kind::kMapping: {
      std::size_t total = kValueBytes;
      for (const auto& [key, item] : value.as_mapping()) {
        total += key.size() + value_bytes(item);
      }
      return total;
    }
    default:
      return kValueBytes;
  }
}

std::size_t record_bytes(const IterationRecord& record) {
  constexpr std::size_t kEntryOverhead = 256;  // list node, map slot, vectors
  std::size_t total = kEntryOverhead + record.output.size();
  for (const auto& dependency : record.dependencies) {
    total += sizeof(Dependency) + value_bytes(dependency.value);
  }
  for (const auto& effect : record.effects) {
    total += sizeof(Effect) + value_bytes(effect.value);
  }
  return total;
}

}  // namespace

bool identical(const Value& left, const Value& right) {
  if (left.kind() != right.kind()) {
    return false;
  }
  switch (left.kind()) {
    case Value::Kind::kUndefined:
    case Value::Kind::kNone:
      return true;
    case Value::Kind::kBool:
      return left.as_bool() == right.as_bool();
    case Value::Kind::kInteger:
      return left.as_integer() == right.as_integer();
    case Value::Kind::kFloat:
      return std::bit_cast<std::uint64_t>(left.as_float()) == std::bit_cast<std::uint64_t>(right.as_float());
    case Value::Kind::kString:
      return &left.as_string() == &right.as_string() || left.as_string() == right.as_string();
    case Value::Kind::kList: {
      const List& a = left.as_list();
      const List& b = right.as_list();
      if (&a == &b) {
        return true;
      }
      if (a.size() != b.size()) {
        return false;
      }
      for (std::size_t index = 0; index < a.size(); ++index) {
        if (!identical(a[index], b[index])) {
          return false;
        }
      }
      return true;
    }
    case Value::Kind::kMapping: {
      const Mapping& a = left.as_mapping();
      const Mapping& b = right.as_mapping();
      if (&a == &b) {
        return true;
      }
      if (a.size() != b.size()) {
        return false;
      }
      for (std::size_t index = 0; index < a.size(); ++index) {
        if (a[index].first != b[index].first || !identical(a[index].second, b[index].second)) {
          return false;
        }
      }
      return true;
    }
    case Value::Kind::kNamespace:
      return false;
    case Value::Kind::kFunction:
      return &left.as_function() == &right.as_function();
  }
  return false;
}

std::uint64_t fingerprint(const Value& value) {
  return fingerprint_at(value, 0);
}

std::size_t IterationMemo::KeyHash::operator()(const Key& key) const {
  std::uint64_t seed = mix(reinterpret_cast<std::uintptr_t>(key.program), reinterpret_cast<std::uintptr_t>(key.loop));
  return static_cast<std::size_t>(mix(seed, key.item));
}

const IterationRecord* IterationMemo::find(const Key& key) {
  auto found = map_.find(key);
  if (found == map_.end()) {
    return nullptr;
  }
  order_.splice(order_.begin(), order_, found->second);
  return &found->second->record;
}

void IterationMemo::store(const Key& key, std::shared_ptr<const void> program, IterationRecord record) {
  std::size_t bytes = record_bytes(record);
  if (bytes > capacity_bytes_ / 4) {  // one iteration may not flush the memo
    return;
  }
  if (auto found = map_.find(key); found != map_.end()) {
    bytes_ -= found->second->bytes;
    order_.erase(found->second);
    map_.erase(found);
  }
  evict_to(capacity_bytes_ - bytes);
  order_.push_front(Entry{key, std::move(program), std::move(record), bytes});
  map_.emplace(key, order_.begin());
  bytes_ += bytes;
}

void IterationMemo::evict_to(std::size_t budget) {
  while (bytes_ > budget && !order_.empty()) {
    const Entry& last = order_.back();
    bytes_ -= last.bytes;
    map_.erase(last.key);
    order_.pop_back();
  }
}

}  // namespace kvgate::chat_template
