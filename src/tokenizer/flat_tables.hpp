#pragma once
// Open-addressing tables for the tokenizer's read-only lookups, built once at
// load and probed on every word: string -> id (vocabulary) and id pair ->
// (rank, id) (merges). Flat arrays, linear probing, no per-entry allocation;
// sized for a load factor between 0.35 and 0.7 (memory counts: a tokenizer
// should take at most a few times its file).
#include <xxhash.h>

#include <bit>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "kvgate/core/token.hpp"

namespace kvgate::tokenizer {

inline constexpr TokenId kNoToken = UINT32_MAX;

inline std::uint64_t hash_bytes(std::string_view bytes) {
  return XXH3_64bits(bytes.data(), bytes.size());
}

// Slots for `entries` at a load factor of at most 0.7.
inline std::size_t table_capacity(std::size_t entries) {
  return std::bit_ceil(entries * 10 / 7 + 16);
}

// A bit per key, by the top bits of a 64-bit hash of it (independent of a
// table's slot index, which takes low ones): 2M bits, 256 kB that stay in
// cache and tell most absent keys from present ones without a probe of
// megabytes. Holds nothing (and must not be asked) until `reset`.
class BitFilter {
 public:
  void reset() { bits_.assign(kBits / 64, 0); }
  [[nodiscard]] bool empty() const { return bits_.empty(); }
  void add(std::uint64_t hash) {
    const std::size_t bit = bit_of(hash);
    bits_[bit >> 6] |= std::uint64_t{1} << (bit & 63);
  }
  // False when the key is certainly absent. Only after `reset`.
  [[nodiscard]] bool may_hold(std::uint64_t hash) const {
    const std::size_t bit = bit_of(hash);
    return ((bits_[bit >> 6] >> (bit & 63)) & 1) != 0;
  }
  [[nodiscard]] std::size_t memory_bytes() const { return bits_.capacity() * sizeof(std::uint64_t); }

 private:
  // Under 1 in 4 set by Gemma 3's 514k merges, 1 in 8 by its 262k tokens.
  static constexpr unsigned kLog2 = 21;
  static constexpr std::size_t kBits = std::size_t{1} << kLog2;
  static std::size_t bit_of(std::uint64_t hash) { return static_cast<std::size_t>(hash >> (64 - kLog2)); }
  std::vector<std::uint64_t> bits_;
};

// Strings and their ids. Most words of random text (base64, identifiers)
// are no token, and with `ignore_merges` every word is looked up whole
// first: a bit per hashed key, 256 kB that stays in cache, answers those
// before a probe of megabytes.
class StringTable {
 public:
  void reserve(std::size_t entries) {
    slots_.assign(table_capacity(entries), Slot{});
    mask_ = slots_.size() - 1;
    filter_.reset();
  }
  // Later inserts of the same key replace the id.
  void insert(std::string_view key, TokenId id) {
    if ((size_ + 1) * 10 > slots_.size() * 7) grow();
    const std::uint64_t hash = hash_bytes(key);
    if (filter_.empty()) filter_.reset();
    filter_.add(hash);
    place(key, hash, id);
  }
  [[nodiscard]] TokenId find(std::string_view key) const { return find(key, hash_bytes(key)); }
  // Starts loading the slot a later find(key, hash) probes first.
  void prefetch(std::uint64_t hash) const {
    if (!slots_.empty()) __builtin_prefetch(&slots_[hash & mask_]);
  }
  [[nodiscard]] TokenId find(std::string_view key, std::uint64_t hash) const {
    if (slots_.empty() || !filter_.may_hold(hash)) return kNoToken;
    for (std::size_t index = hash & mask_;; index = (index + 1) & mask_) {
      const Slot& slot = slots_[index];
      if (slot.id == kNoToken) return kNoToken;
      if (slot.hash == hash && key_of(slot) == key) return slot.id;
    }
  }
  [[nodiscard]] std::size_t size() const { return size_; }
  [[nodiscard]] std::size_t memory_bytes() const {
    return slots_.capacity() * sizeof(Slot) + keys_.capacity() + filter_.memory_bytes();
  }
  // Calls fn(key, id) for every entry, in no particular order.
  template <typename Fn>
  void for_each(Fn&& fn) const {
    for (const Slot& slot : slots_) {
      if (slot.id != kNoToken) fn(key_of(slot), slot.id);
    }
  }

 private:
  // Keys up to kInlineBytes long (most tokens) are held in the slot, so a
  // hit costs the slot's cache line alone, not another miss in `keys_`.
  static constexpr std::size_t kInlineBytes = 16;
  struct alignas(32) Slot {
    std::uint64_t hash = 0;
    std::uint32_t length = 0;
    TokenId id = kNoToken;
    union {
      char bytes[kInlineBytes];
      std::uint32_t offset;  // in keys_, for longer keys
    } key{};
  };
  [[nodiscard]] std::string_view key_of(const Slot& slot) const {
    if (slot.length <= kInlineBytes) return {slot.key.bytes, slot.length};
    return std::string_view(keys_).substr(slot.key.offset, slot.length);
  }
  void place(std::string_view key, std::uint64_t hash, TokenId id) {
    for (std::size_t index = hash & mask_;; index = (index + 1) & mask_) {
      Slot& slot = slots_[index];
      if (slot.id == kNoToken) {
        slot = Slot{hash, static_cast<std::uint32_t>(key.size()), id, {}};
        if (key.size() <= kInlineBytes) {
          if (!key.empty()) {  // an empty view may hold no pointer, which memcpy must not get
            std::memcpy(slot.key.bytes, key.data(), key.size());
          }
        } else {
          slot.key.offset = static_cast<std::uint32_t>(keys_.size());
          keys_.append(key);
        }
        ++size_;
        return;
      }
      if (slot.hash == hash && key_of(slot) == key) {
        slot.id = id;
        return;
      }
    }
  }
  void grow() {
    std::vector<Slot> old = std::move(slots_);
    slots_.assign(std::max<std::size_t>(old.size() * 2, 32), Slot{});
    mask_ = slots_.size() - 1;
    for (const Slot& slot : old) {
      if (slot.id == kNoToken) continue;
      for (std::size_t index = slot.hash & mask_;; index = (index + 1) & mask_) {
        if (slots_[index].id == kNoToken) {
          slots_[index] = slot;
          break;
        }
      }
    }
  }

  std::vector<Slot> slots_;
  std::string keys_;
  std::size_t mask_ = 0;
  std::size_t size_ = 0;
  BitFilter filter_;
};

struct Merge {
  std::uint32_t rank = UINT32_MAX;  // position in the merges list; lower merges first
  TokenId merged = kNoToken;
};

// The merge table: (left id, right id) -> rank and merged id. A probe of
// its megabytes misses the cache; most pairs a word asks about are no merge
// (random letters, base64, CJK), so a bit per hashed pair, 256 kB that stays
// in cache, answers those first.
class PairTable {
 public:
  void reserve(std::size_t entries) {
    slots_.assign(table_capacity(entries), Slot{});
    mask_ = slots_.size() - 1;
    filter_.reset();
  }
  // A pair listed twice keeps its last rank, as both reference
  // implementations do (their maps are filled in file order).
  void insert(TokenId left, TokenId right, Merge merge) {
    std::uint64_t key = pack(left, right);
    filter_.add(spread(key));
    for (std::size_t index = mix(key) & mask_;; index = (index + 1) & mask_) {
      Slot& slot = slots_[index];
      if (slot.merge.merged == kNoToken || slot.key == key) {
        slot = Slot{key, merge};
        return;
      }
    }
  }
  // Starts loading the slot a later insert or find of the pair probes first.
  void prefetch(TokenId left, TokenId right) const { __builtin_prefetch(&slots_[mix(pack(left, right)) & mask_]); }
  // False when the pair is certainly no merge (answered from the filter).
  [[nodiscard]] bool may_hold(TokenId left, TokenId right) const { return filter_.may_hold(spread(pack(left, right))); }
  [[nodiscard]] Merge find(TokenId left, TokenId right) const {
    return may_hold(left, right) ? find_in_table(left, right) : Merge{};
  }
  [[nodiscard]] std::size_t memory_bytes() const { return slots_.capacity() * sizeof(Slot) + filter_.memory_bytes(); }
  // Calls fn(left, right, merge) for every pair, in no particular order.
  template <typename Fn>
  void for_each(Fn&& fn) const {
    for (const Slot& slot : slots_) {
      if (slot.merge.merged != kNoToken) {
        fn(static_cast<TokenId>(slot.key >> 32), static_cast<TokenId>(slot.key & 0xFFFFFFFFU), slot.merge);
      }
    }
  }

 private:
  struct Slot {
    std::uint64_t key = 0;
    Merge merge;
  };
  static std::uint64_t pack(TokenId left, TokenId right) { return (std::uint64_t{left} << 32) | right; }
  // Fibonacci hashing spreads the packed ids' low bits: the product for
  // the filter (its top bits), the product's middle bits for the slot.
  static std::uint64_t spread(std::uint64_t key) { return key * 0x9E3779B97F4A7C15ULL; }
  static std::uint64_t mix(std::uint64_t key) { return spread(key) >> 20; }
  [[nodiscard]] Merge find_in_table(TokenId left, TokenId right) const {
    std::uint64_t key = pack(left, right);
    for (std::size_t index = mix(key) & mask_;; index = (index + 1) & mask_) {
      const Slot& slot = slots_[index];
      if (slot.merge.merged == kNoToken) return {};
      if (slot.key == key) return slot.merge;
    }
  }

  friend class PairMemo;  // keys and spreads pairs as the table does

  std::vector<Slot> slots_;
  std::size_t mask_ = 0;
  BitFilter filter_;
};

// Recent merge-table answers, direct-mapped: 256 kB that stay in the
// core's cache, in front of a table of megabytes whose probes miss it.
// Short words of random letters (base64) ask about the same few thousand
// pairs of letters and their merges over and over, and so do the
// backtracking encoder's replays on long words of them (each its own memo:
// shared, the two thrashed each other's on CJK). Per thread and per
// tokenizer (a workspace keeps one scratch per loaded tokenizer, so a pair
// of ids means one thing); a slot holds the last pair that hashed there.
class PairMemo {
 public:
  PairMemo() : slots_(kSlots) {}
  // What `table.find(left, right)` answers, from the memo when the pair was
  // the last asked about in its slot.
  Merge find(const PairTable& table, TokenId left, TokenId right) {
    const std::uint64_t key = PairTable::pack(left, right);
    Slot& slot = slots_[PairTable::spread(key) >> (64 - kSlotsLog2)];
    if (slot.key != key) {
      slot.key = key;
      slot.merge = table.find(left, right);
    }
    return slot.merge;
  }

 private:
  static constexpr unsigned kSlotsLog2 = 14;
  static constexpr std::size_t kSlots = std::size_t{1} << kSlotsLog2;
  struct Slot {
    std::uint64_t key = UINT64_MAX;  // no pair: ids are below kNoToken
    Merge merge;
  };
  std::vector<Slot> slots_;
};

}  // namespace kvgate::tokenizer
