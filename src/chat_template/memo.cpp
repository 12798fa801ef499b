#include "memo.hpp"

#include <string.h>  // memmem

#include <algorithm>
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

// Strings at least this long are looked for in the output.
constexpr std::size_t kSliceBytes = 64;

enum Tag : char {
  kUndefinedTag = 'u',
  kNoneTag = 'n',
  kBoolTag = 'b',
  kIntegerTag = 'i',
  kFloatTag = 'f',
  kStringTag = 's',    // size, bytes
  kSliceTag = 'o',     // offset and size in the output
  kListTag = 'l',      // count, items
  kMappingTag = 'm',   // count, (key size, key, value)...
  kFunctionTag = 'F',  // address: builtins are shared by every render
  kNeverTag = 'x',     // a namespace: never identical
};

void put_tag(std::string& out, Tag tag) {
  out.push_back(static_cast<char>(tag));
}

void put_number(std::string& out, std::uint64_t number) {
  out.append(reinterpret_cast<const char*>(&number), sizeof number);
}

void encode_into(const Value& value, std::string_view output, std::string& out) {
  switch (value.kind()) {
    case Value::Kind::kUndefined:
      put_tag(out, kUndefinedTag);
      return;
    case Value::Kind::kNone:
      put_tag(out, kNoneTag);
      return;
    case Value::Kind::kBool:
      put_tag(out, kBoolTag);
      out += value.as_bool() ? '1' : '0';
      return;
    case Value::Kind::kInteger:
      put_tag(out, kIntegerTag);
      put_number(out, static_cast<std::uint64_t>(value.as_integer()));
      return;
    case Value::Kind::kFloat:
      put_tag(out, kFloatTag);
      put_number(out, std::bit_cast<std::uint64_t>(value.as_float()));
      return;
    case Value::Kind::kString: {
      const std::string& text = value.as_string();
      if (text.size() >= kSliceBytes) {
        // memmem is linear in the worst case (two-way), unlike find.
        const void* found = memmem(output.data(), output.size(), text.data(), text.size());
        if (found != nullptr) {
          put_tag(out, kSliceTag);
          put_number(out, static_cast<std::uint64_t>(static_cast<const char*>(found) - output.data()));
          put_number(out, text.size());
          return;
        }
      }
      put_tag(out, kStringTag);
      put_number(out, text.size());
      out += text;
      return;
    }
    case Value::Kind::kList:
      put_tag(out, kListTag);
      put_number(out, value.as_list().size());
      for (const Value& item : value.as_list()) {
        encode_into(item, output, out);
      }
      return;
    case Value::Kind::kMapping:
      put_tag(out, kMappingTag);
      put_number(out, value.as_mapping().size());
      for (const auto& [key, item] : value.as_mapping()) {
        put_number(out, key.size());
        out += key;
        encode_into(item, output, out);
      }
      return;
    case Value::Kind::kFunction:
      put_tag(out, kFunctionTag);
      put_number(out, reinterpret_cast<std::uintptr_t>(&value.as_function()));
      return;
    case Value::Kind::kNamespace:
      put_tag(out, kNeverTag);
      return;
  }
}

// Reads an encoding written by encode_into; any mismatch (or a malformed
// remainder, which cannot happen) answers false.
class EncodedReader {
 public:
  EncodedReader(std::string_view encoded, std::string_view output) : encoded_(encoded), output_(output) {}

  bool matches(const Value& value) {
    if (at_ >= encoded_.size()) {
      return false;
    }
    char tag = encoded_[at_++];
    switch (value.kind()) {
      case Value::Kind::kUndefined:
        return tag == kUndefinedTag;
      case Value::Kind::kNone:
        return tag == kNoneTag;
      case Value::Kind::kBool:
        return tag == kBoolTag && at_ < encoded_.size() && encoded_[at_++] == (value.as_bool() ? '1' : '0');
      case Value::Kind::kInteger:
        return tag == kIntegerTag && number() == static_cast<std::uint64_t>(value.as_integer());
      case Value::Kind::kFloat:
        return tag == kFloatTag && number() == std::bit_cast<std::uint64_t>(value.as_float());
      case Value::Kind::kString:
        return matches_text(tag, value.as_string());
      case Value::Kind::kList: {
        const List& items = value.as_list();
        if (tag != kListTag || number() != items.size()) {
          return false;
        }
        return std::all_of(items.begin(), items.end(), [this](const Value& item) { return matches(item); });
      }
      case Value::Kind::kMapping: {
        const Mapping& entries = value.as_mapping();
        if (tag != kMappingTag || number() != entries.size()) {
          return false;
        }
        return std::all_of(entries.begin(), entries.end(), [this](const auto& entry) {
          return matches_text(kStringTag, entry.first) && matches(entry.second);
        });
      }
      case Value::Kind::kFunction:
        return tag == kFunctionTag && number() == reinterpret_cast<std::uintptr_t>(&value.as_function());
      case Value::Kind::kNamespace:
        return false;
    }
    return false;
  }

  [[nodiscard]] bool finished() const { return at_ == encoded_.size(); }

 private:
  std::uint64_t number() {
    std::uint64_t result = 0;
    if (at_ + sizeof result <= encoded_.size()) {
      std::memcpy(&result, encoded_.data() + at_, sizeof result);
    }
    at_ += sizeof result;
    return result;
  }

  // Keys are written without a tag (kStringTag stands for them).
  bool matches_text(char tag, std::string_view text) {
    if (tag == kSliceTag) {
      std::uint64_t offset = number();
      std::uint64_t size = number();
      return size == text.size() && offset <= output_.size() && size <= output_.size() - offset &&
             output_.substr(offset, size) == text;
    }
    if (tag != kStringTag) {
      return false;
    }
    std::uint64_t size = number();
    if (size != text.size() || at_ > encoded_.size() || size > encoded_.size() - at_) {
      return false;
    }
    bool same = encoded_.substr(at_, size) == text;
    at_ += size;
    return same;
  }

  std::string_view encoded_;
  std::string_view output_;
  std::size_t at_ = 0;
};

// A copy that shares nothing with the request it came from: values may alias
// a request's body (Value::text_in), which a record must not keep alive.
Value detached(const Value& value) {
  switch (value.kind()) {
    case Value::Kind::kString:
      return Value(std::string(value.as_string()));
    case Value::Kind::kList: {
      List items;
      items.reserve(value.as_list().size());
      for (const Value& item : value.as_list()) {
        items.push_back(detached(item));
      }
      return Value(std::move(items));
    }
    case Value::Kind::kMapping: {
      Mapping entries;
      entries.reserve(value.as_mapping().size());
      for (const auto& [key, item] : value.as_mapping()) {
        entries.emplace_back(key, detached(item));
      }
      return Value(std::move(entries));
    }
    default:
      return value;
  }
}

std::size_t record_bytes(const IterationRecord& record) {
  constexpr std::size_t kEntryOverhead = 256;  // list node, map slot, vectors
  std::size_t total = kEntryOverhead + record.output.size();
  for (const auto& dependency : record.dependencies) {
    total += sizeof(Dependency) + dependency.encoded.size();
  }
  for (const auto& effect : record.effects) {
    total += sizeof(Effect) + value_bytes(effect.value);
  }
  return total;
}

}  // namespace

std::uint64_t fingerprint(const Value& value) {
  return fingerprint_at(value, 0);
}

bool IterationMemo::records_small_items(const void* program, const Node* loop) const {
  return std::find(small_item_loops_.begin(), small_item_loops_.end(), std::make_pair(program, loop)) !=
         small_item_loops_.end();
}

void IterationMemo::note_small_items_pay(const void* program, const Node* loop) {
  constexpr std::size_t kMaxLoops = 256;
  if (records_small_items(program, loop)) {
    return;
  }
  if (small_item_loops_.size() >= kMaxLoops) {  // templates reloaded many times: start over
    small_item_loops_.clear();
  }
  small_item_loops_.emplace_back(program, loop);
}

std::string encode_value(const Value& value, std::string_view output) {
  std::string encoded;
  encode_into(value, output, encoded);
  return encoded;
}

bool matches_encoded(const Value& value, std::string_view encoded, std::string_view output) {
  EncodedReader reader(encoded, output);
  return reader.matches(value) && reader.finished();
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
  for (auto& dependency : record.dependencies) {
    if (dependency.kind != Dependency::Kind::kTest && dependency.kind != Dependency::Kind::kNamespace) {
      dependency.encoded = encode_value(dependency.value, record.output);
      dependency.value = Value();
    }
  }
  std::size_t bytes = record_bytes(record);
  if (bytes > capacity_bytes_ / 4) {  // one iteration may not flush the memo
    return;
  }
  for (auto& effect : record.effects) {
    effect.value = detached(effect.value);
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
