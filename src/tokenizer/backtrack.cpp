#include "backtrack.hpp"

#include <algorithm>
#include <cstring>

namespace kvgate::tokenizer {

namespace {
constexpr std::size_t kDepthTwoFrom = 4096;  // entries; smaller tries walk from the root
}  // namespace

std::unique_ptr<BacktrackingEncoder> BacktrackingEncoder::build(const std::vector<std::string_view>& vocabulary,
                                                                const std::vector<TokenId>& base_tokens,
                                                                const PairTable& merges,
                                                                const EncodesToItself& encodes_to_itself) {
  std::unique_ptr<BacktrackingEncoder> encoder(new BacktrackingEncoder(merges));
  auto& tokens = encoder->tokens_;
  tokens.resize(vocabulary.size());
  for (std::size_t id = 0; id < vocabulary.size(); ++id) {
    tokens[id].length = static_cast<std::uint32_t>(vocabulary[id].size());
  }
  std::vector<TokenId> bases = base_tokens;
  std::sort(bases.begin(), bases.end());
  bases.erase(std::unique(bases.begin(), bases.end()), bases.end());
  for (TokenId id : bases) {
    if (id >= tokens.size() || tokens[id].length == 0) {
      continue;
    }
    tokens[id].order = encoder->base_count_++;
    tokens[id].left = id;
    tokens[id].right = id;
  }

  // The merges in rank order: a token's inputs are placed before the merges
  // that use them are looked at. A rank is the merge's position in the list,
  // so each has one merge at most and they are laid out by it, not sorted.
  struct RankedMerge {
    TokenId left = kNoToken;
    TokenId right = kNoToken;
    TokenId merged = kNoToken;  // kNoToken: no merge has this rank
  };
  std::uint32_t rank_end = 0;
  merges.for_each([&](TokenId, TokenId, Merge merge) { rank_end = std::max(rank_end, merge.rank + 1); });
  std::vector<RankedMerge> by_rank(rank_end);
  merges.for_each([&](TokenId left, TokenId right, Merge merge) {
    if (merge.merged < tokens.size() && left < tokens.size() && right < tokens.size()) {
      by_rank[merge.rank] = RankedMerge{left, right, merge.merged};
    }
  });
  std::vector<TokenId> unplaced;
  for (std::uint32_t rank = 0; rank < rank_end; ++rank) {
    const auto [left, right, merged] = by_rank[rank];
    if (merged == kNoToken) {
      continue;
    }
    TokenInfo& token = tokens[merged];
    if (token.order != kNotMatched) {
      continue;  // an earlier merge already builds it
    }
    const std::uint32_t order = encoder->base_count_ + rank;
    // BPE on the token's own text reaches (left, right) and joins them at
    // this rank unless a merge across their boundary comes first.
    if (tokens[left].order == kNotMatched || tokens[right].order == kNotMatched ||
        !encoder->compatible(left, right, order, nullptr)) {
      unplaced.push_back(merged);
      continue;
    }
    token.order = order;
    token.left = left;
    token.right = right;
  }
  // A token several merges make is listed once per merge.
  std::sort(unplaced.begin(), unplaced.end());
  unplaced.erase(std::unique(unplaced.begin(), unplaced.end()), unplaced.end());
  ByteTrie::Entries late;  // output by BPE, made only by a merge listed before its inputs
  for (TokenId id : unplaced) {
    if (tokens[id].order == kNotMatched && encodes_to_itself(vocabulary[id], id)) {
      late.emplace_back(vocabulary[id], id);
      encoder->unplaced_first_[static_cast<unsigned char>(vocabulary[id].front())] = true;
    }
  }
  if (late.size() > kMaxUnplaced) {
    return nullptr;
  }
  encoder->unplaced_.build(std::move(late), [](TokenId, TokenId) {});
  ByteTrie::Entries matched;
  for (std::size_t id = 0; id < tokens.size(); ++id) {
    if (tokens[id].order != kNotMatched) {
      matched.emplace_back(vocabulary[id], static_cast<TokenId>(id));
    }
  }
  encoder->matched_.build(std::move(matched), [&](TokenId id, TokenId shorter) { tokens[id].shorter = shorter; });
  return encoder;
}

namespace {

// A string's first eight bytes as one number that orders as the bytes do
// (big-endian; a shorter string is padded with zero bytes, and a tie is
// settled by the whole strings).
std::uint64_t order_prefix(std::string_view text) {
  unsigned char bytes[8] = {};
  if (!text.empty()) {  // an empty view may hold no pointer, which memcpy must not get
    std::memcpy(bytes, text.data(), std::min<std::size_t>(text.size(), sizeof bytes));
  }
  std::uint64_t prefix = 0;
  for (unsigned char byte : bytes) {
    prefix = (prefix << 8) | byte;
  }
  return prefix;
}

}  // namespace

void ByteTrie::build(Entries entries, const std::function<void(TokenId, TokenId)>& on_entry) {
  // Sorted by text, as the breadth-first walk below needs. Most comparisons
  // are settled by the first eight bytes as one number, cheaper than
  // comparing the strings themselves on large vocabularies.
  std::vector<std::pair<std::uint64_t, std::uint32_t>> keys(entries.size());
  for (std::size_t index = 0; index < entries.size(); ++index) {
    keys[index] = {order_prefix(entries[index].first), static_cast<std::uint32_t>(index)};
  }
  std::sort(keys.begin(), keys.end(), [&entries](const auto& left, const auto& right) {
    if (left.first != right.first) {
      return left.first < right.first;
    }
    return entries[left.second] < entries[right.second];
  });
  Entries matched;
  matched.reserve(entries.size());
  for (const auto& [prefix, index] : keys) {
    matched.push_back(entries[index]);
  }
  // A node per distinct prefix: each string adds the bytes past what it
  // shares with the one before it. Counted first, the arrays are made once
  // at their size: grown by doubling, their copies and the pages of the
  // abandoned buffers would weigh on the build (a large vocabulary makes
  // about a million nodes).
  std::size_t node_count = 1;
  for (std::size_t index = 0; index < matched.size(); ++index) {
    const std::string_view text = matched[index].first;
    std::size_t shared = 0;
    if (index > 0) {
      const std::string_view before = matched[index - 1].first;
      shared = static_cast<std::size_t>(std::mismatch(text.begin(), text.end(), before.begin(), before.end()).first -
                                        text.begin());
    }
    node_count += text.size() - shared;
  }
  // Breadth first, so that each node's children are made together and sit
  // side by side. `ancestor`: the nearest matched token above the node.
  // One per node, in the nodes' order.
  struct Pending {
    std::uint32_t node;
    std::uint32_t begin;
    std::uint32_t end;
    std::uint32_t depth;
    TokenId ancestor;
  };
  std::vector<Pending> queue;
  queue.reserve(node_count);
  queue.push_back(Pending{0, 0, static_cast<std::uint32_t>(matched.size()), 0, kNoToken});
  nodes_.clear();
  nodes_.reserve(node_count);
  nodes_.push_back(Node{});
  labels_.clear();
  labels_.reserve(node_count);
  labels_.push_back(0);
  for (std::size_t next = 0; next < queue.size(); ++next) {
    Pending item = queue[next];
    TokenId ancestor = item.ancestor;
    if (item.begin < item.end && matched[item.begin].first.size() == item.depth) {
      const TokenId id = matched[item.begin].second;  // strings are unique: one ends here at most
      nodes_[item.node].token = id;
      on_entry(id, item.ancestor);
      ancestor = id;
      ++item.begin;
    }
    nodes_[item.node].first_child = static_cast<std::uint32_t>(nodes_.size());
    for (std::size_t first = item.begin; first < item.end;) {
      const char byte = matched[first].first[item.depth];
      std::size_t last = first;
      while (last < item.end && matched[last].first[item.depth] == byte) {
        ++last;
      }
      queue.push_back(Pending{static_cast<std::uint32_t>(nodes_.size()), static_cast<std::uint32_t>(first),
                              static_cast<std::uint32_t>(last), item.depth + 1, ancestor});
      nodes_.push_back(Node{.parent = item.node});
      labels_.push_back(static_cast<unsigned char>(byte));
      ++nodes_[item.node].child_count;
      first = last;
    }
  }
  if (entries.size() >= kDepthTwoFrom) {
    depth_two_.assign(std::size_t{1} << 16, 0);
    const Node& root = nodes_[0];
    for (std::uint32_t one = root.first_child; one < root.first_child + root.child_count; ++one) {
      for (std::uint32_t two = nodes_[one].first_child; two < nodes_[one].first_child + nodes_[one].child_count;
           ++two) {
        depth_two_[(std::size_t{labels_[one]} << 8) | labels_[two]] = two;
      }
    }
  }
}

// Whether BPE, given the text of `left` followed by that of `right`, ends
// with exactly these two tokens, before any merge ranked at or above
// `limit`. Replays the two tokens' construction from the last merge down,
// always undoing the later-made of the two tokens that meet at the
// boundary, and fails when a merge across the boundary would come before
// the merge being undone (on equal terms the left pair wins, as in BPE).
bool BacktrackingEncoder::compatible(TokenId left, TokenId right, std::uint32_t limit, PairMemo* memo) const {
  for (;;) {
    const TokenInfo& left_info = tokens_[left];
    const TokenInfo& right_info = tokens_[right];
    // Both pieces are made before `limit` (each is an input of the token
    // whose merge set it), so the pair can fire before it exactly when its
    // rank does, even for a pair listed before its inputs exist.
    if (const Merge across = memo != nullptr && merges_.may_hold(left, right) ? memo->find(merges_, left, right)
                                                                              : merges_.find(left, right);
        across.merged != kNoToken && base_count_ + across.rank < limit) {
      return false;
    }
    // A base token is its own left input; a merged one never is.
    if (left_info.order > right_info.order) {
      limit = left_info.order;
      if (left_info.left != left) {
        left = left_info.right;
        continue;
      }
      limit = right_info.order + 1;
      if (right_info.left == right) {
        return true;
      }
      right = right_info.left;
    } else {
      limit = right_info.order + 1;
      if (right_info.left != right) {
        right = right_info.left;
        continue;
      }
      limit = left_info.order;
      if (left_info.left == left) {
        return true;
      }
      left = left_info.right;
    }
  }
}

namespace {
// 512k slots, 4 MB per workspace: CJK text in byte-level vocabularies
// (a character often two tokens) asks about tens of thousands of distinct
// pairs, and random-letter words about hundreds of thousands; smaller
// tables thrash on them and larger ones gain nothing more (BENCHMARKS.md,
// Tokenisation).
constexpr unsigned kAnswerBits = 19;
}  // namespace

bool BacktrackingEncoder::remembered_compatible(TokenId left, TokenId right, BacktrackScratch& scratch) const {
  std::vector<std::uint64_t>& answers = scratch.answers;
  if (tokens_[left].left == left && tokens_[right].left == right) {
    // Two base tokens (text where few merges apply, such as CJK): only their
    // own merge could join them, and the merge table's filter answers that
    // from cache.
    return merges_.find(left, right).merged == kNoToken;
  }
  const std::uint64_t pair = (std::uint64_t{left} << 32) | right;
  std::uint64_t& slot = answers[(pair * 0x9E3779B97F4A7C15ULL) >> (64 - kAnswerBits)];
  if (slot != 0 && (slot - 1) >> 1 == pair) {
    return ((slot - 1) & 1) != 0;
  }
  const bool answer = compatible(left, right, kNotMatched, &scratch.merges);
  slot = ((pair << 1) | static_cast<std::uint64_t>(answer)) + 1;
  return answer;
}

std::uint32_t ByteTrie::child(std::uint32_t node, unsigned char byte) const {
  const Node& current = nodes_[node];
  const unsigned char* children = labels_.data() + current.first_child;
  const void* found = std::memchr(children, byte, current.child_count);
  return found == nullptr
             ? 0
             : current.first_child + static_cast<std::uint32_t>(static_cast<const unsigned char*>(found) - children);
}

TokenId ByteTrie::longest_match(std::string_view text) const {
  TokenId best = kNoToken;
  std::uint32_t node = 0;
  std::size_t position = 0;
  if (!depth_two_.empty() && text.size() >= 2) {
    // The first two bytes by table: every walk takes them, and memchr over
    // the root's and its children's up to 256 labels is most of a short walk.
    const auto first = static_cast<unsigned char>(text[0]);
    node = depth_two_[(std::size_t{first} << 8) | static_cast<unsigned char>(text[1])];
    if (node == 0) {
      const std::uint32_t one = child(0, first);
      return one == 0 ? kNoToken : nodes_[one].token;
    }
    const TokenId parent_token = nodes_[nodes_[node].parent].token;
    best = nodes_[node].token != kNoToken ? nodes_[node].token : parent_token;
    position = 2;
  }
  for (; position < text.size(); ++position) {
    if (nodes_[node].child_count == 0) {
      break;
    }
    node = child(node, static_cast<unsigned char>(text[position]));
    if (node == 0) {
      break;
    }
    if (nodes_[node].token != kNoToken) {
      best = nodes_[node].token;
    }
  }
  return best;
}

bool BacktrackingEncoder::holds_unplaced(std::string_view word) const {
  if (unplaced_.empty()) {
    return false;
  }
  for (std::size_t position = 0; position < word.size(); ++position) {
    if (unplaced_first_[static_cast<unsigned char>(word[position])] &&
        unplaced_.longest_match(word.substr(position)) != kNoToken) {
      return true;
    }
  }
  return false;
}

std::optional<std::size_t> BacktrackingEncoder::encode_run(std::string_view text, std::vector<TokenId>& out,
                                                           BacktrackScratch& scratch) const {
  std::vector<TokenId>& tokens = scratch.tokens;
  std::vector<std::uint64_t>& dead = scratch.dead;
  tokens.clear();
  // All clear between runs (each run clears what it set): a word cut into
  // many runs by characters outside the vocabulary must not clear the rest
  // of the word each time.
  if (dead.size() < (text.size() >> 6) + 1) {
    dead.resize((text.size() >> 6) + 1, 0);
  }
  std::size_t dead_words = 0;  // words of `dead` that may hold a set bit
  auto clear_dead = [&] { std::fill(dead.begin(), dead.begin() + static_cast<std::ptrdiff_t>(dead_words), 0); };
  if (scratch.answers.empty()) {
    scratch.answers.assign(std::size_t{1} << kAnswerBits, 0);
  }
  auto is_dead = [&](std::size_t position) { return ((dead[position >> 6] >> (position & 63)) & 1) != 0; };
  std::size_t position = 0;
  TokenId next = matched_.longest_match(text);
  while (next != kNoToken) {
    TokenId token = next;
    const TokenId last = tokens.empty() ? kNoToken : tokens.back();
    for (;;) {
      const std::size_t end = position + tokens_[token].length;
      if (!is_dead(end) && (last == kNoToken || remembered_compatible(last, token, scratch))) {
        tokens.push_back(token);
        position = end;
        next = matched_.longest_match(text.substr(end));
        break;
      }
      if (tokens_[token].shorter != kNoToken) {
        token = tokens_[token].shorter;
        continue;
      }
      // Nothing compatible starts here: never come back to this position.
      dead[position >> 6] |= std::uint64_t{1} << (position & 63);
      dead_words = std::max(dead_words, (position >> 6) + 1);
      if (last == kNoToken) {
        clear_dead();
        return std::nullopt;  // BPE always has an answer: a merge list the replay misreads
      }
      tokens.pop_back();
      position -= tokens_[last].length;
      next = last;
      break;
    }
  }
  // No token starts at `position`: the end, or a character that is no token,
  // which BPE never merges, so the run's ids are final.
  clear_dead();
  out.insert(out.end(), tokens.begin(), tokens.end());
  return position;
}

bool BacktrackingEncoder::encode(std::string_view word, std::vector<TokenId>& out, BacktrackScratch& scratch) const {
  if (holds_unplaced(word)) {
    return false;
  }
  const std::size_t first = out.size();
  const auto run = encode_run(word, out, scratch);
  if (!run || *run != word.size()) {
    out.resize(first);
    return false;
  }
  ++scratch.words;
  return true;
}

std::size_t BacktrackingEncoder::memory_bytes() const {
  return tokens_.capacity() * sizeof(TokenInfo) + matched_.memory_bytes() + unplaced_.memory_bytes();
}

}  // namespace kvgate::tokenizer
