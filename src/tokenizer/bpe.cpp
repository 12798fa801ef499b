#include "bpe.hpp"

#include <algorithm>
#include <array>
#include <cstring>
#include <functional>

#include "kvgate/core/utf8.hpp"

namespace kvgate::tokenizer {

namespace {

// GPT-2's table: bytes that are printable Latin-1 map to themselves, the
// others, in byte order, to U+0100, U+0101, ...
struct ByteTable {
  std::array<char32_t, 256> to_unicode{};
  std::array<int, 324> to_byte{};
  ByteTable() {
    to_byte.fill(-1);
    char32_t next = 256;
    for (int byte = 0; byte < 256; ++byte) {
      bool printable = (byte >= '!' && byte <= '~') || (byte >= 0xA1 && byte <= 0xAC) || (byte >= 0xAE && byte <= 0xFF);
      to_unicode[byte] = printable ? static_cast<char32_t>(byte) : next++;
      to_byte[to_unicode[byte]] = byte;
    }
  }
};

const ByteTable& byte_table() {
  static const ByteTable kTable;
  return kTable;
}

// Words longer than this merge with a priority queue; shorter ones with a
// linear scan, which is faster for the few symbols most words have.
constexpr std::size_t kLinearMergeLimit = 48;
// Longer words are not memoised (as in the reference implementation).
constexpr std::size_t kCacheableLength = WordCache::kLongestWord + 1;

}  // namespace

char32_t byte_to_unicode(std::uint8_t byte) {
  return byte_table().to_unicode[byte];
}

int unicode_to_byte(char32_t code_point) {
  return code_point < byte_table().to_byte.size() ? byte_table().to_byte[code_point] : -1;
}

bool byte_level_to_raw(std::string_view token, std::string& raw) {
  raw.clear();
  std::size_t position = 0;
  while (position < token.size()) {
    int byte = unicode_to_byte(next_code_point(token, position));
    if (byte < 0) {
      return false;
    }
    raw.push_back(static_cast<char>(byte));
  }
  return true;
}

std::optional<std::string> byte_level_to_raw(std::string_view token) {
  std::string raw;
  raw.reserve(token.size());
  if (!byte_level_to_raw(token, raw)) {
    return std::nullopt;
  }
  return raw;
}

BpeModel::BpeModel(const VocabularyEntries& vocabulary, const MergeEntries& merges, BpeOptions options)
    : options_(options) {
  vocabulary_.reserve(vocabulary.size() + 1024);
  std::string raw;
  for (const auto& [token, id] : vocabulary) {
    if (!options_.byte_level) {
      vocabulary_.insert(token, id);
    } else if (byte_level_to_raw(token, raw)) {
      vocabulary_.insert(raw, id);
    }
  }
  merges_.reserve(merges.size());
  // Three vocabulary lookups per merge, each a cache miss in tables of
  // megabytes (half a million merges for Gemma 3): a batch's slots are
  // prefetched before any is probed. Each merge's two texts sit side by
  // side in `texts`, which makes the joined text a view too.
  constexpr std::size_t kBatch = 32;
  struct Pending {
    std::uint32_t rank;
    std::uint32_t at;
    std::uint32_t left_length;
    std::uint32_t right_length;
    std::uint64_t left_hash;
    std::uint64_t right_hash;
    std::uint64_t joined_hash;
    TokenId left = kNoToken;  // resolved in the second pass
    TokenId right = kNoToken;
    TokenId merged = kNoToken;
  };
  std::vector<Pending> batch;
  batch.reserve(kBatch);
  std::string texts;
  std::string left_raw;
  std::string right_raw;
  for (std::size_t start = 0; start < merges.size(); start += kBatch) {
    batch.clear();
    texts.clear();
    const std::size_t end = std::min(merges.size(), start + kBatch);
    for (std::size_t index = start; index < end; ++index) {
      std::string_view left = merges[index].first;
      std::string_view right = merges[index].second;
      if (options_.byte_level) {
        if (!byte_level_to_raw(left, left_raw) || !byte_level_to_raw(right, right_raw)) {
          continue;
        }
        left = left_raw;
        right = right_raw;
      }
      const auto at = static_cast<std::uint32_t>(texts.size());
      texts.append(left);
      texts.append(right);
      const std::string_view stored(texts.data() + at, left.size() + right.size());
      Pending pending{static_cast<std::uint32_t>(index),
                      at,
                      static_cast<std::uint32_t>(left.size()),
                      static_cast<std::uint32_t>(right.size()),
                      hash_bytes(stored.substr(0, left.size())),
                      hash_bytes(stored.substr(left.size())),
                      hash_bytes(stored)};
      vocabulary_.prefetch(pending.left_hash);
      vocabulary_.prefetch(pending.right_hash);
      vocabulary_.prefetch(pending.joined_hash);
      batch.push_back(pending);
    }
    for (Pending& pending : batch) {
      const std::string_view joined(texts.data() + pending.at, pending.left_length + pending.right_length);
      pending.left = vocabulary_.find(joined.substr(0, pending.left_length), pending.left_hash);
      pending.right = vocabulary_.find(joined.substr(pending.left_length), pending.right_hash);
      if (pending.left != kNoToken && pending.right != kNoToken) {
        pending.merged = vocabulary_.find(joined, pending.joined_hash);
        merges_.prefetch(pending.left, pending.right);
      }
    }
    // In list order: a pair listed twice keeps its last rank.
    for (const Pending& pending : batch) {
      if (pending.merged != kNoToken) {
        merges_.insert(pending.left, pending.right, Merge{pending.rank, pending.merged});
        ++merge_count_;
      }
    }
  }
  find_word_boundaries(vocabulary);
  static constexpr char kHex[] = "0123456789ABCDEF";
  for (int byte = 0; byte < 256; ++byte) {
    if (options_.byte_level) {
      byte_tokens_[byte] = vocabulary_.find(std::string(1, static_cast<char>(byte)));
    } else {
      std::string name = "<0x";
      name += kHex[byte >> 4];
      name += kHex[byte & 15];
      name += '>';
      byte_tokens_[byte] = vocabulary_.find(name);
    }
  }
}

namespace {

constexpr std::string_view kWordMarker = "\u2581";  // SentencePiece's visible space
constexpr std::size_t kMaxBridges = 64;

// Whether the marker starts at `position`. Three bytes compared in place:
// string_view's compare called memcmp for them, a tenth of Gemma 3's
// encoding of whitespace runs (a marker per space).
bool marker_at(std::string_view word, std::size_t position) {
  static_assert(kWordMarker.size() == 3);
  return position + 3 <= word.size() && word[position] == kWordMarker[0] && word[position + 1] == kWordMarker[1] &&
         word[position + 2] == kWordMarker[2];
}

// Whether a marker ends where `position` is: a marker after a marker never
// starts a piece, since a run of markers merges with itself.
bool follows_marker(std::string_view word, std::size_t position) {
  return position >= kWordMarker.size() && marker_at(word, position - kWordMarker.size());
}

// The first marker at or after `from`; npos if none.
std::size_t next_marker(std::string_view word, std::size_t from) {
  while (from < word.size()) {
    const void* lead = std::memchr(word.data() + from, kWordMarker[0], word.size() - from);
    if (lead == nullptr) {
      return std::string_view::npos;
    }
    from = static_cast<std::size_t>(static_cast<const char*>(lead) - word.data());
    if (marker_at(word, from)) {
      return from;
    }
    ++from;
  }
  return std::string_view::npos;
}

}  // namespace

void BpeModel::find_word_boundaries(const VocabularyEntries& vocabulary) {
  if (options_.byte_level || options_.ignore_merges || vocabulary_.find(kWordMarker) == kNoToken) {
    return;
  }
  for (const auto& [token, id] : vocabulary) {
    for (auto at = next_marker(token, 1); at != std::string_view::npos;
         at = next_marker(token, at + kWordMarker.size())) {
      if (!follows_marker(token, at)) {
        bridges_.emplace_back(std::string(token), at);
      }
    }
    if (bridges_.size() > kMaxBridges) {
      bridges_.clear();
      return;  // markers join text freely in this vocabulary: no safe split
    }
  }
  split_at_markers_ = true;
}

// A split before `position` (where a marker starts) is safe when the marker
// follows another character (a run of markers merges with itself) and no
// bridging token covers it.
bool BpeModel::splits_before(std::string_view word, std::size_t position) const {
  if (position < kWordMarker.size() || follows_marker(word, position)) {
    return false;
  }
  for (const auto& [token, offset] : bridges_) {
    if (position >= offset && word.compare(position - offset, token.size(), token) == 0) {
      return false;
    }
  }
  return true;
}

void BpeModel::initial_symbols(std::string_view word, std::vector<Symbol>& symbols) const {
  symbols.clear();
  std::size_t position = 0;
  // The last character looked up and its id: runs of one character (spaces
  // as markers) look it up once, not once per character.
  std::string_view last_character;
  TokenId last_id = kNoToken;
  while (position < word.size()) {
    std::size_t length = options_.byte_level ? 1 : utf8_sequence_length(static_cast<unsigned char>(word[position]));
    length = std::min(length, word.size() - position);
    TokenId id = kNoToken;
    if (options_.byte_level) {
      id = byte_tokens_[static_cast<unsigned char>(word[position])];
    } else {
      const std::string_view character = word.substr(position, length);
      if (character != last_character) {
        last_character = character;
        last_id = vocabulary_.find(character);
      }
      id = last_id;
    }
    auto index = static_cast<std::int32_t>(symbols.size());
    symbols.push_back(
        Symbol{id, static_cast<std::uint32_t>(position), static_cast<std::uint32_t>(length), index - 1, index + 1});
    position += length;
  }
  if (!symbols.empty()) {
    symbols.back().next = -1;
  }
}

void BpeModel::merge_small(std::vector<Symbol>& symbols, std::vector<Merge>& pairs, PairMemo& memo) const {
  auto rank_of = [&](std::size_t left) {
    const Symbol& a = symbols[left];
    const Symbol& b = symbols[left + 1];
    if (a.id == kNoToken || b.id == kNoToken) {
      return Merge{};
    }
    return memo.find(merges_, a.id, b.id);
  };
  // Probes of different pairs are independent: a slot the filter does not
  // rule out starts loading before the first probe is read, so that their
  // cache misses overlap.
  auto prefetch = [&](std::size_t left) {
    const TokenId a = symbols[left].id;
    const TokenId b = symbols[left + 1].id;
    if (a != kNoToken && b != kNoToken && merges_.may_hold(a, b)) {
      merges_.prefetch(a, b);
    }
  };
  pairs.clear();
  for (std::size_t left = 0; left + 1 < symbols.size(); ++left) {
    prefetch(left);
  }
  for (std::size_t left = 0; left + 1 < symbols.size(); ++left) {
    pairs.push_back(rank_of(left));
  }
  while (!pairs.empty()) {
    std::size_t best = 0;
    for (std::size_t index = 1; index < pairs.size(); ++index) {
      if (pairs[index].rank < pairs[best].rank) {
        best = index;  // strict: the leftmost of equal ranks wins
      }
    }
    if (pairs[best].merged == kNoToken) {
      return;
    }
    symbols[best].id = pairs[best].merged;
    symbols[best].length += symbols[best + 1].length;
    symbols.erase(symbols.begin() + static_cast<std::ptrdiff_t>(best) + 1);
    pairs.erase(pairs.begin() + static_cast<std::ptrdiff_t>(best));
    if (best > 0 && best < pairs.size()) {
      prefetch(best);  // overlaps with the probe for the pair on the left
    }
    if (best > 0) {
      pairs[best - 1] = rank_of(best - 1);
    }
    if (best < pairs.size()) {
      pairs[best] = rank_of(best);
    }
  }
}

// Hugging Face tokenizers' word merge: candidates ordered by (rank,
// position), one 64-bit key each; entries made stale by earlier merges are
// recognised when popped (the pair at that position no longer has that rank:
// ranks are unique per pair) and skipped.
void BpeModel::merge_large(std::vector<Symbol>& symbols, MergeQueue& queue) const {
  queue.clear();
  auto consider = [&](std::int32_t left) {
    const Symbol& a = symbols[static_cast<std::size_t>(left)];
    if (a.next < 0) {
      return;
    }
    const Symbol& b = symbols[static_cast<std::size_t>(a.next)];
    if (a.id == kNoToken || b.id == kNoToken) {
      return;
    }
    const Merge merge = merges_.find(a.id, b.id);
    if (merge.merged != kNoToken) {
      queue.push((std::uint64_t{merge.rank} << 32) | static_cast<std::uint32_t>(left));
    }
  };
  for (std::size_t index = 0; index + 1 < symbols.size(); ++index) {
    consider(static_cast<std::int32_t>(index));
  }
  while (!queue.empty()) {
    const std::uint64_t key = queue.pop();
    const auto position = static_cast<std::int32_t>(key & 0xFFFFFFFFU);
    Symbol& left = symbols[static_cast<std::size_t>(position)];
    if (left.length == 0 || left.next < 0) {
      continue;
    }
    Symbol& right = symbols[static_cast<std::size_t>(left.next)];
    if (left.id == kNoToken || right.id == kNoToken) {
      continue;
    }
    const Merge merge = merges_.find(left.id, right.id);
    if (merge.merged == kNoToken || merge.rank != key >> 32) {
      continue;  // stale: the pair here changed after this candidate was queued
    }
    left.id = merge.merged;
    left.length += right.length;
    right.length = 0;
    left.next = right.next;
    if (right.next >= 0) {
      symbols[static_cast<std::size_t>(right.next)].previous = position;
    }
    if (left.previous >= 0) {
      consider(left.previous);
    }
    consider(position);
  }
  std::erase_if(symbols, [](const Symbol& symbol) { return symbol.length == 0; });
}

void MergeQueue::push(std::uint64_t key) {
  const std::size_t bucket = bucket_of(key);
  if (key < last_ || (bucket == 0 && taking_)) {
    late_.push_back(key);
    std::push_heap(late_.begin(), late_.end(), std::greater<>{});
  } else {
    buckets_[bucket].push_back(key);
    ++radix_size_;
  }
}

std::uint64_t MergeQueue::pop() {
  std::vector<std::uint64_t>& lowest = buckets_[0];
  if (!taking_) {
    // The word's first candidates of rank 0 (a list's first merge, such as
    // Llama 3.1's two spaces) were pushed in position order.
    std::sort(lowest.begin(), lowest.end(), std::greater<>{});
    taking_ = true;
  }
  // A late key of last_'s rank or below is smaller than any key in the
  // other buckets: taken first, so that last_ does not move past it.
  if (radix_size_ > 0 && lowest.empty() && (late_.empty() || (late_.front() >> 32) > (last_ >> 32))) {
    std::size_t index = 1;
    while (buckets_[index].empty()) {
      ++index;
    }
    std::vector<std::uint64_t>& source = buckets_[index];
    last_ = *std::min_element(source.begin(), source.end());
    for (std::uint64_t key : source) {
      buckets_[bucket_of(key)].push_back(key);  // a lower bucket: every rank here shares bit index-1 with last_'s
    }
    source.clear();
    // One rank's candidates, taken from the left (the word's merge order
    // among equal ranks): popped from the back.
    std::sort(lowest.begin(), lowest.end(), std::greater<>{});
  }
  if (!late_.empty() && (lowest.empty() || late_.front() < lowest.back())) {
    std::pop_heap(late_.begin(), late_.end(), std::greater<>{});
    const std::uint64_t key = late_.back();
    late_.pop_back();
    return key;
  }
  const std::uint64_t key = lowest.back();
  lowest.pop_back();
  --radix_size_;
  return key;
}

void MergeQueue::clear() {
  for (auto& bucket : buckets_) {
    bucket.clear();
  }
  late_.clear();
  last_ = 0;
  taking_ = false;
  radix_size_ = 0;
}

void BpeModel::emit(std::string_view word, const std::vector<Symbol>& symbols, std::vector<TokenId>& out) const {
  for (const Symbol& symbol : symbols) {
    if (symbol.id != kNoToken) {
      out.push_back(symbol.id);
      continue;
    }
    bool emitted = false;
    if (options_.byte_fallback) {
      std::string_view bytes = word.substr(symbol.begin, symbol.length);
      emitted = std::all_of(bytes.begin(), bytes.end(),
                            [&](char byte) { return byte_tokens_[static_cast<unsigned char>(byte)] != kNoToken; });
      if (emitted) {
        for (char byte : bytes) {
          out.push_back(byte_tokens_[static_cast<unsigned char>(byte)]);
        }
      }
    }
    if (!emitted && options_.unknown != kNoToken) {
      out.push_back(options_.unknown);
    }
  }
}

void BpeModel::encode_word(std::string_view word, std::vector<TokenId>& out, BpeScratch& scratch) const {
  if (word.empty()) {
    return;
  }
  if (options_.ignore_merges) {
    if (TokenId whole = vocabulary_.find(word); whole != kNoToken) {
      out.push_back(whole);
      return;
    }
  }
  if (split_at_markers_ && word.size() > kLinearMergeLimit) {
    std::size_t start = 0;
    for (auto at = next_marker(word, 1); at != std::string_view::npos; at = next_marker(word, at)) {
      if (splits_before(word, at)) {
        encode_piece(word.substr(start, at - start), out, scratch);
        start = at;
      }
      // The rest of a run of markers, which never split (follows_marker).
      do {
        at += kWordMarker.size();
      } while (marker_at(word, at));
    }
    encode_piece(word.substr(start), out, scratch);
    return;
  }
  encode_piece(word, out, scratch);
}

void BpeModel::encode_piece(std::string_view word, std::vector<TokenId>& out, BpeScratch& scratch) const {
  bool cacheable = word.size() < kCacheableLength;
  std::uint64_t hash = 0;
  if (cacheable) {
    hash = hash_bytes(word);
    std::size_t count = 0;
    if (const TokenId* cached = scratch.cache.find(word, hash, count)) {
      scratch.cache.count_hit();
      out.insert(out.end(), cached, cached + count);
      return;
    }
    scratch.cache.count_miss();
  }
  std::size_t first = out.size();
  const BacktrackingEncoder* fast = word.size() > kLinearMergeLimit ? backtracking() : nullptr;
  if (fast == nullptr || !encode_backtracking(*fast, word, out, scratch)) {
    merge_symbols(word, scratch);
    emit(word, scratch.symbols, out);
  }
  if (cacheable) {
    scratch.cache.insert(word, hash, out.data() + first, out.size() - first);
  }
}

bool BpeModel::encode_backtracking(const BacktrackingEncoder& fast, std::string_view word, std::vector<TokenId>& out,
                                   BpeScratch& scratch) const {
  if (fast.holds_unplaced(word)) {
    return false;
  }
  const std::size_t first = out.size();
  for (std::size_t start = 0; start < word.size();) {
    const auto run = fast.encode_run(word.substr(start), out, scratch.backtrack);
    if (!run) {
      out.resize(first);
      return false;
    }
    start += *run;
    if (start == word.size()) {
      break;
    }
    // A character outside the vocabulary: its symbol never merges, so it
    // is spelled as emit() spells it (byte fallback or the unknown token).
    std::size_t length = options_.byte_level ? 1 : utf8_sequence_length(static_cast<unsigned char>(word[start]));
    length = std::min(length, word.size() - start);
    scratch.symbols.assign(
        1, Symbol{kNoToken, static_cast<std::uint32_t>(start), static_cast<std::uint32_t>(length), -1, -1});
    emit(word, scratch.symbols, out);
    start += length;
  }
  ++scratch.backtrack.words;
  return true;
}

void BpeModel::merge_symbols(std::string_view word, BpeScratch& scratch) const {
  initial_symbols(word, scratch.symbols);
  if (scratch.symbols.size() <= kLinearMergeLimit) {
    merge_small(scratch.symbols, scratch.pairs, scratch.pair_memo);
  } else {
    merge_large(scratch.symbols, scratch.queue);
  }
}

void BpeModel::merge_word(std::string_view word, std::vector<TokenId>& out, BpeScratch& scratch) const {
  merge_symbols(word, scratch);
  emit(word, scratch.symbols, out);
}

std::size_t BpeModel::memory_bytes() const {
  std::size_t bytes = vocabulary_.memory_bytes() + merges_.memory_bytes();
  // Not through backtracking(), which would build it: a build in progress
  // on another thread is counted once it is done.
  if (backtracking_state_.load(std::memory_order_acquire) == BuildState::kDone && backtracking_ != nullptr) {
    bytes += backtracking_->memory_bytes();
  }
  return bytes;
}

const BacktrackingEncoder* BpeModel::backtracking() const {
  if (!options_.backtracking) {
    return nullptr;
  }
  auto state = backtracking_state_.load(std::memory_order_acquire);
  if (state == BuildState::kDone) {
    return backtracking_.get();
  }
  if (state == BuildState::kBuilding ||
      !backtracking_state_.compare_exchange_strong(state, BuildState::kBuilding, std::memory_order_acquire)) {
    // Another thread builds it (or has just built it: `state` says which).
    return state == BuildState::kDone ? backtracking_.get() : nullptr;
  }
  try {
    backtracking_ = build_backtracking();
  } catch (...) {
    // Out of memory: as call_once would, the next call tries again.
    backtracking_state_.store(BuildState::kNotStarted, std::memory_order_release);
    backtracking_state_.notify_all();
    throw;
  }
  backtracking_state_.store(BuildState::kDone, std::memory_order_release);
  backtracking_state_.notify_all();
  return backtracking_.get();
}

void BpeModel::prepare_backtracking() const {
  if (!options_.backtracking) {
    return;
  }
  for (;;) {
    (void)backtracking();
    const auto state = backtracking_state_.load(std::memory_order_acquire);
    if (state == BuildState::kDone) {
      return;
    }
    if (state == BuildState::kBuilding) {
      backtracking_state_.wait(BuildState::kBuilding, std::memory_order_acquire);
    }
  }
}

std::unique_ptr<BacktrackingEncoder> BpeModel::build_backtracking() const {
  std::vector<std::string_view> by_id;
  std::vector<TokenId> base_tokens;
  bool shared_id = false;
  vocabulary_.for_each([&](std::string_view token, TokenId id) {
    if (token.empty()) {
      return;
    }
    if (id >= by_id.size()) {
      by_id.resize(id + 1);
    }
    shared_id = shared_id || !by_id[id].empty();
    by_id[id] = token;
    const std::size_t symbol_length =
        options_.byte_level ? 1 : utf8_sequence_length(static_cast<unsigned char>(token.front()));
    if (token.size() == symbol_length) {
      base_tokens.push_back(id);
    }
  });
  if (shared_id) {
    return nullptr;  // two texts with one id (a malformed file): the encoder maps ids to texts
  }
  BpeScratch scratch;
  auto encodes_to_itself = [&](std::string_view text, TokenId id) {
    merge_symbols(text, scratch);
    return scratch.symbols.size() == 1 && scratch.symbols.front().id == id;
  };
  return BacktrackingEncoder::build(by_id, base_tokens, merges_, encodes_to_itself);
}

WordCache::WordCache(std::size_t slots) : slots_(std::bit_ceil(std::max<std::size_t>(slots, 16))) {}

const TokenId* WordCache::find(std::string_view word, std::uint64_t hash, std::size_t& count) const {
  const std::size_t mask = slots_.size() - 1;
  const auto tag = static_cast<std::uint32_t>(hash >> 32);
  for (std::size_t index = hash & mask;; index = (index + 1) & mask) {
    const Slot& slot = slots_[index];
    if (slot.word_length == 0) {
      return nullptr;
    }
    if (slot.tag == tag && slot.word_length == word.size()) {
      const TokenId* ids = entries_.data() + slot.offset;
      if (std::memcmp(ids + slot.ids_count, word.data(), word.size()) == 0) {
        count = slot.ids_count;
        return ids;
      }
    }
  }
}

void WordCache::insert(std::string_view word, std::uint64_t hash, const TokenId* ids, std::size_t count) {
  if (word.empty() || word.size() > kLongestWord || count > UINT16_MAX) {
    return;
  }
  const std::size_t elements = count + (word.size() + sizeof(TokenId) - 1) / sizeof(TokenId);
  if ((used_ + 1) * 2 > slots_.size() || entries_.size() + elements > UINT32_MAX / 2) {
    clear();
  }
  const std::size_t mask = slots_.size() - 1;
  for (std::size_t index = hash & mask;; index = (index + 1) & mask) {
    Slot& slot = slots_[index];
    if (slot.word_length != 0) {
      continue;
    }
    const std::size_t offset = entries_.size();
    slot = Slot{static_cast<std::uint32_t>(hash >> 32), static_cast<std::uint32_t>(offset),
                static_cast<std::uint16_t>(word.size()), static_cast<std::uint16_t>(count)};
    entries_.resize(offset + elements);
    std::copy(ids, ids + count, entries_.begin() + static_cast<std::ptrdiff_t>(offset));
    std::memcpy(entries_.data() + offset + count, word.data(), word.size());
    ++used_;
    return;
  }
}

void WordCache::clear() {
  std::fill(slots_.begin(), slots_.end(), Slot{});
  entries_.clear();
  used_ = 0;
}

}  // namespace kvgate::tokenizer
