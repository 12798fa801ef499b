// The BPE merge of long words (through MergeQueue) against a plain quadratic
// reference of the rule: lowest rank first, leftmost among equals; with a
// merge list learned in order, and one naming pairs before their inputs
// are made (as lists converted from tiktoken ranks do).
#include <gtest/gtest.h>

#include <algorithm>
#include <latch>
#include <map>
#include <random>
#include <set>
#include <thread>

#include "bpe.hpp"

namespace kvgate::tokenizer {
namespace {

using Vocabulary = std::vector<std::pair<std::string, TokenId>>;
using Merges = std::vector<std::pair<std::string, std::string>>;

// Every string of length 1-4 over {a, b, c}; each longer one made by one or
// two merges of shorter ones (so some tokens have two makers, as in merge
// lists converted from tiktoken ranks).
struct Fixture {
  Vocabulary vocabulary;
  Merges merges;
};

Fixture make_fixture(bool in_creation_order, std::uint32_t seed) {
  Fixture fixture;
  std::vector<std::vector<std::string>> by_length(5);
  by_length[1] = {"a", "b", "c"};
  for (std::size_t length = 2; length <= 4; ++length) {
    for (const auto& shorter : by_length[length - 1]) {
      for (char last : std::string("abc")) {
        by_length[length].push_back(shorter + last);
      }
    }
  }
  for (const auto& tokens : by_length) {
    for (const auto& token : tokens) {
      fixture.vocabulary.emplace_back(token, static_cast<TokenId>(fixture.vocabulary.size()));
    }
  }
  std::mt19937 random(seed);
  std::vector<std::vector<std::pair<std::string, std::string>>> merges_by_length(5);
  for (std::size_t length = 2; length <= 4; ++length) {
    for (const auto& token : by_length[length]) {
      const std::size_t split = 1 + random() % (length - 1);
      merges_by_length[length].emplace_back(token.substr(0, split), token.substr(split));
      if (length > 2 && random() % 3 == 0) {
        const std::size_t other = split == 1 ? length - 1 : 1;
        merges_by_length[length].emplace_back(token.substr(0, other), token.substr(other));
      }
    }
    std::shuffle(merges_by_length[length].begin(), merges_by_length[length].end(), random);
  }
  // Out of creation order: the 3-symbol merges come first, before the
  // 2-symbol merges that make their inputs.
  const std::vector<std::size_t> order =
      in_creation_order ? std::vector<std::size_t>{2, 3, 4} : std::vector<std::size_t>{3, 2, 4};
  for (std::size_t length : order) {
    fixture.merges.insert(fixture.merges.end(), merges_by_length[length].begin(), merges_by_length[length].end());
  }
  return fixture;
}

// The rule itself, quadratic: merge the lowest-ranked adjacent pair (the
// leftmost among equals) until none is listed.
class Reference {
 public:
  explicit Reference(const Fixture& fixture) : ids_(fixture.vocabulary.begin(), fixture.vocabulary.end()) {
    for (std::size_t index = 0; index < fixture.merges.size(); ++index) {
      rank_[fixture.merges[index]] = index;  // a pair listed twice keeps its last rank
    }
  }

  [[nodiscard]] std::vector<TokenId> encode(const std::string& word) const {
    std::vector<std::string> symbols;
    for (char letter : word) {
      symbols.emplace_back(1, letter);
    }
    for (;;) {
      std::size_t best = symbols.size();
      std::size_t best_rank = SIZE_MAX;
      for (std::size_t index = 0; index + 1 < symbols.size(); ++index) {
        auto found = rank_.find({symbols[index], symbols[index + 1]});
        if (found != rank_.end() && found->second < best_rank) {
          best = index;
          best_rank = found->second;
        }
      }
      if (best == symbols.size()) {
        break;
      }
      symbols[best] += symbols[best + 1];
      symbols.erase(symbols.begin() + static_cast<std::ptrdiff_t>(best) + 1);
    }
    std::vector<TokenId> out;
    for (const auto& symbol : symbols) {
      out.push_back(ids_.at(symbol));
    }
    return out;
  }

 private:
  std::map<std::pair<std::string, std::string>, std::size_t> rank_;
  std::map<std::string, TokenId> ids_;
};

// BpeModel keeps copies of what it reads from the views.
BpeModel model_of(const Fixture& fixture, BpeOptions options = {}) {
  const VocabularyEntries vocabulary(fixture.vocabulary.begin(), fixture.vocabulary.end());
  const MergeEntries merges(fixture.merges.begin(), fixture.merges.end());
  return BpeModel(vocabulary, merges, options);
}

std::string random_word(std::mt19937& random, std::size_t length, std::string_view alphabet) {
  std::string word;
  for (std::size_t index = 0; index < length; ++index) {
    word += alphabet[random() % alphabet.size()];
  }
  return word;
}

void expect_reference_results(bool in_creation_order) {
  for (std::uint32_t seed = 1; seed <= 4; ++seed) {
    const Fixture fixture = make_fixture(in_creation_order, seed);
    const BpeModel model = model_of(fixture);
    const Reference reference(fixture);
    BpeScratch scratch;
    std::mt19937 random(seed * 7919);
    for (int sample = 0; sample < 60; ++sample) {
      // Short words take the linear merge, words over 48 symbols the queue;
      // a two-letter alphabet makes long runs of one pair (leftmost wins).
      const std::size_t length = sample % 2 == 0 ? 2 + random() % 46 : 49 + random() % 400;
      const std::string alphabet = sample % 3 == 0 ? "ab" : "abc";
      const std::string word = random_word(random, length, alphabet);
      std::vector<TokenId> ids;
      model.merge_word(word, ids, scratch);
      ASSERT_EQ(ids, reference.encode(word)) << "seed " << seed << " word " << word;
    }
  }
}

TEST(BpeMerge, MergesListedInCreationOrderMatchTheReference) {
  expect_reference_results(true);
}

TEST(BpeMerge, MergesListedBeforeTheirInputsAreMadeMatchTheReference) {
  expect_reference_results(false);
}

// Random words of up to `longest` letters through the encoder of the
// fixture's list: every word it takes gets the reference's ids. Returns how
// many it took.
std::size_t words_taken_with_the_reference_ids(const Fixture& fixture, std::uint32_t seed, int samples,
                                               std::size_t longest) {
  const BpeModel model = model_of(fixture);
  const Reference reference(fixture);
  const BacktrackingEncoder* encoder = model.backtracking();
  EXPECT_NE(encoder, nullptr) << "seed " << seed;
  if (encoder == nullptr) {
    return 0;
  }
  BpeScratch scratch;
  std::mt19937 random(seed * 104729);
  std::size_t taken = 0;
  for (int sample = 0; sample < samples; ++sample) {
    const std::string word = random_word(random, 1 + random() % longest, sample % 3 == 0 ? "ab" : "abc");
    std::vector<TokenId> ids;
    if (encoder->encode(word, ids, scratch.backtrack)) {
      ++taken;
      EXPECT_EQ(ids, reference.encode(word)) << "seed " << seed << " word " << word;
    }
  }
  // A character outside the vocabulary: the whole-word call declines.
  std::vector<TokenId> ids{7};
  EXPECT_FALSE(encoder->encode("abcxabc", ids, scratch.backtrack));
  EXPECT_EQ(ids, std::vector<TokenId>{7}) << "nothing appended when it declines a word";
  return taken;
}

// The backtracking encoder on the same fixtures: for a list learned in
// order it takes every word and gives the reference's ids.
TEST(BpeBacktracking, GivesTheReferenceIdsForMergesListedInCreationOrder) {
  for (std::uint32_t seed = 1; seed <= 6; ++seed) {
    EXPECT_EQ(words_taken_with_the_reference_ids(make_fixture(true, seed), seed, 150, 160), 150u);
  }
}

// Characters outside the vocabulary never merge: the encoder stops its run
// there, the model spells the character (here the unknown token) and the
// next run starts after it, with the merge's ids.
TEST(BpeBacktracking, ACharacterOutsideTheVocabularyEndsARunNotTheWord) {
  Fixture fixture = make_fixture(true, 3);
  const auto unknown = static_cast<TokenId>(fixture.vocabulary.size());
  fixture.vocabulary.emplace_back("<unk>", unknown);
  const BpeModel model = model_of(fixture, BpeOptions{.unknown = unknown});
  BpeScratch scratch;
  std::mt19937 random(11);
  for (int sample = 0; sample < 100; ++sample) {
    std::string word;
    const std::size_t length = 49 + random() % 200;  // over 48 bytes: the encoder's words
    for (std::size_t index = 0; index < length; ++index) {
      word += random() % 9 == 0 ? 'x' : "abc"[random() % 3];
    }
    std::vector<TokenId> fast;
    std::vector<TokenId> merged;
    model.encode_word(word, fast, scratch);
    model.merge_word(word, merged, scratch);
    ASSERT_EQ(fast, merged) << word;
  }
  EXPECT_EQ(scratch.backtrack.words, 100u);
}

// The first long word builds the encoder. Other threads' long words that
// arrive during the build are merged pair by pair instead of waiting for
// it, and get the same ids; prepare_backtracking() returns only once the
// encoder is built, whichever thread builds it.
TEST(BpeBacktracking, WordsArrivingDuringTheBuildGetTheReferenceIdsAndPrepareWaitsForIt) {
  const Fixture fixture = make_fixture(true, 3);
  const Reference reference(fixture);
  std::mt19937 random(11);
  std::vector<std::string> words;
  std::vector<std::vector<TokenId>> expected;
  for (int index = 0; index < 30; ++index) {
    words.push_back(random_word(random, 60 + random() % 300, "abc"));
    expected.push_back(reference.encode(words.back()));
  }
  for (int round = 0; round < 30; ++round) {
    const BpeModel model = model_of(fixture);
    std::atomic<int> mismatches{0};
    std::atomic<int> prepared_without_encoder{0};
    std::latch start(3);
    auto encode_all = [&] {
      BpeScratch scratch;
      start.arrive_and_wait();
      for (std::size_t index = 0; index < words.size(); ++index) {
        std::vector<TokenId> ids;
        model.encode_word(words[index], ids, scratch);
        if (ids != expected[index]) {
          ++mismatches;
        }
      }
    };
    auto prepare = [&] {
      start.arrive_and_wait();
      model.prepare_backtracking();
      if (model.backtracking() == nullptr) {
        ++prepared_without_encoder;
      }
    };
    std::thread first(encode_all);
    std::thread second(encode_all);
    std::thread third(prepare);
    first.join();
    second.join();
    third.join();
    EXPECT_EQ(mismatches.load(), 0) << "round " << round;
    EXPECT_EQ(prepared_without_encoder.load(), 0) << "round " << round;
    EXPECT_NE(model.backtracking(), nullptr);
  }
}

// Found by the tokenizer fuzzer: a file giving two texts one id. The
// encoder knows a token by one text, so it stands aside for the merge.
TEST(BpeBacktracking, StandsAsideWhenTwoTextsShareAnId) {
  const VocabularyEntries vocabulary{{"a", 1}, {"b", 1}, {"ab", 2}};
  const BpeModel model(vocabulary, MergeEntries{}, BpeOptions{});
  EXPECT_EQ(model.backtracking(), nullptr);
  BpeScratch scratch;
  std::vector<TokenId> ids;
  model.encode_word(std::string(60, 'a') + std::string(60, 'b'), ids, scratch);
  EXPECT_EQ(ids, std::vector<TokenId>(120, 1));
}

// "abc" is made only by (a, bc), listed before (b, c) makes "bc": the
// merge fires when "bc" appears, not at its rank, which the encoder's replay
// does not follow. Words holding "abc" are left to the merge; the others
// are the encoder's and still get the reference's ids.
TEST(BpeBacktracking, LeavesWordsHoldingATokenMadeOutOfRankOrderToTheMerge) {
  Fixture fixture;
  fixture.vocabulary = {{"a", 0}, {"b", 1}, {"c", 2}, {"bc", 3}, {"abc", 4}};
  fixture.merges = {{"a", "bc"}, {"b", "c"}};
  const BpeModel model = model_of(fixture);
  const BacktrackingEncoder* encoder = model.backtracking();
  ASSERT_NE(encoder, nullptr);
  const Reference reference(fixture);
  BpeScratch scratch;
  std::string holding;
  std::string without;
  for (int repeat = 0; repeat < 40; ++repeat) {
    holding += repeat % 3 == 0 ? "abc" : "bca";
    without += "bcaacb";  // "a" never before "bc"
  }
  std::vector<TokenId> ids;
  EXPECT_FALSE(encoder->encode(holding, ids, scratch.backtrack));
  model.encode_word(holding, ids, scratch);
  EXPECT_EQ(ids, reference.encode(holding));
  EXPECT_NE(std::find(ids.begin(), ids.end(), TokenId{4}), ids.end());
  ids.clear();
  ASSERT_TRUE(encoder->encode(without, ids, scratch.backtrack));
  EXPECT_EQ(ids, reference.encode(without));
}

// The random lists with merges out of rank order: whatever the encoder
// takes, it encodes as the reference does.
TEST(BpeBacktracking, WordsItTakesFromOutOfOrderListsGetTheReferenceIds) {
  std::size_t taken = 0;
  for (std::uint32_t seed = 1; seed <= 6; ++seed) {
    taken += words_taken_with_the_reference_ids(make_fixture(false, seed), seed, 300, 60);
  }
  EXPECT_GT(taken, 20u);  // most words of these dense lists hold an out-of-order token
}

// Keys mostly at or above the last popped one (radix buckets, refilled
// across widely spread bits) and sometimes below it (the side heap).
TEST(BpeMerge, TheQueuePopsTheSmallestKeyWhereverItWasPushed) {
  MergeQueue queue;
  std::mt19937_64 random(5);
  std::uint64_t floor = std::uint64_t{1} << 60;
  std::multiset<std::uint64_t> pending;
  int late = 0;
  for (int step = 0; step < 30'000; ++step) {
    if (pending.empty() || random() % 3 != 0) {
      std::uint64_t key = floor + (random() >> (20 + random() % 44));
      if (random() % 10 == 0) {
        key = floor - 1 - (random() >> (24 + random() % 40));
        ++late;
      }
      queue.push(key);
      pending.insert(key);
    } else {
      const std::uint64_t key = queue.pop();
      ASSERT_EQ(key, *pending.begin()) << "step " << step;
      pending.erase(pending.begin());
      floor = key;
    }
  }
  while (!pending.empty()) {
    ASSERT_EQ(queue.pop(), *pending.begin());
    pending.erase(pending.begin());
  }
  EXPECT_TRUE(queue.empty());
  EXPECT_GT(late, 1000);
}

// The merge's own pattern: a word's first candidates pushed in position
// order (rank 0 among them, the bucket the queue starts from), then keys of
// a few ranks only, many of them the rank being taken, to the left and the
// right of the position last taken. The queue is cleared and reused between
// words, as the merge reuses it.
TEST(BpeMerge, TheQueuePopsCandidatesOfOneRankByPositionFromTheFirstPushOn) {
  MergeQueue queue;
  std::mt19937_64 random(9);
  int same_rank = 0;
  for (int word = 0; word < 40; ++word) {
    queue.clear();
    std::multiset<std::uint64_t> pending;
    auto push = [&](std::uint64_t rank, std::uint64_t position) {
      const std::uint64_t key = (rank << 32) | position;
      queue.push(key);
      pending.insert(key);
    };
    const std::uint64_t ranks = 1 + word % 5;  // word 0: every key has rank 0
    for (std::uint64_t position = 0; position < 500; ++position) {
      push(random() % ranks, position);
    }
    std::uint64_t taken = 0;
    for (int step = 0; step < 3'000; ++step) {
      if (pending.empty() || random() % 2 == 0) {
        const std::uint64_t rank = (taken >> 32) + random() % 3;
        same_rank += rank == taken >> 32;
        push(rank, random() % 1'000);
      } else {
        taken = queue.pop();
        ASSERT_EQ(taken, *pending.begin()) << "word " << word << " step " << step;
        pending.erase(pending.begin());
      }
    }
    while (!pending.empty()) {
      ASSERT_EQ(queue.pop(), *pending.begin()) << "word " << word;
      pending.erase(pending.begin());
    }
    EXPECT_TRUE(queue.empty());
  }
  EXPECT_GT(same_rank, 10'000);
}

TEST(BpeMerge, ThePairMemoAnswersWhatTheTableAnswersAfterEveryCollision) {
  // Far more distinct pairs than the memo has slots, asked in a random
  // order with repeats: each answer is the table's, whichever pair held the
  // slot before.
  PairTable table;
  table.reserve(20'000);
  std::mt19937_64 random(11);
  for (TokenId index = 0; index < 20'000; ++index) {
    table.insert(static_cast<TokenId>(random() % 300), static_cast<TokenId>(random() % 300),
                 Merge{index, 100'000 + index});
  }
  PairMemo memo;
  int merges = 0;
  for (int ask = 0; ask < 400'000; ++ask) {
    const auto left = static_cast<TokenId>(random() % 300);
    const auto right = static_cast<TokenId>(random() % 300);
    const Merge expected = table.find(left, right);
    const Merge answer = memo.find(table, left, right);
    ASSERT_EQ(answer.rank, expected.rank) << left << "," << right;
    ASSERT_EQ(answer.merged, expected.merged) << left << "," << right;
    merges += expected.merged != kNoToken;
  }
  EXPECT_GT(merges, 10'000);  // some asks are merges, most are not
}

TEST(FlatTables, TheVocabularyFilterHidesNoKeyAndAnswersMissesAlone) {
  // Keys inserted with and without a reservation (growing) are all found
  // with their ids; keys never inserted are not; a reserved, empty table
  // answers no token.
  std::mt19937_64 random(17);
  auto word = [&random] {
    std::string text(4 + random() % 12, 'a');
    for (char& letter : text) letter = static_cast<char>('a' + random() % 26);
    return text;
  };
  StringTable reserved;
  reserved.reserve(100'000);
  EXPECT_EQ(reserved.find("anything"), kNoToken);
  StringTable grown;
  std::map<std::string, TokenId> inserted;
  for (TokenId id = 0; id < 100'000; ++id) {
    const std::string key = word();
    reserved.insert(key, id);
    grown.insert(key, id);
    inserted[key] = id;  // a repeated key keeps its last id, as the tables do
  }
  for (const auto& [key, id] : inserted) {
    ASSERT_EQ(reserved.find(key), id) << key;
    ASSERT_EQ(grown.find(key), id) << key;
  }
  int absent = 0;
  for (int probe = 0; probe < 100'000; ++probe) {
    const std::string key = word() + "#";  // never inserted
    ASSERT_EQ(reserved.find(key), kNoToken);
    ASSERT_EQ(grown.find(key), kNoToken);
    ++absent;
  }
  EXPECT_EQ(absent, 100'000);
}

TEST(FlatTables, KeysInsideTheSlotAndKeysBesideItAreFoundWhole) {
  // Keys up to the slot's inline size and past it, with every length
  // around the boundary; keys differing only in their last byte or in
  // length stay apart, and for_each gives each key back whole.
  StringTable table;
  std::map<std::string, TokenId> inserted;
  TokenId next = 0;
  for (std::size_t length = 1; length <= 40; ++length) {
    for (char last : {'x', 'y'}) {
      std::string key(length - 1, 'k');
      key += last;
      table.insert(key, next);
      inserted[key] = next++;
    }
  }
  table.insert(std::string_view(), next);  // an empty key, from a view that holds no pointer
  inserted[""] = next;
  for (const auto& [key, id] : inserted) {
    ASSERT_EQ(table.find(key), id) << key;
    ASSERT_EQ(table.find(key + "z"), kNoToken) << key;
  }
  std::map<std::string, TokenId> listed;
  table.for_each([&listed](std::string_view key, TokenId id) { listed[std::string(key)] = id; });
  EXPECT_EQ(listed, inserted);
}

TEST(WordCache, GivesBackEachWordsIdsAndTellsWordsOfOneLengthApart) {
  WordCache cache(1 << 12);
  std::map<std::string, std::vector<TokenId>> kept;
  for (std::size_t length = 1; length <= WordCache::kLongestWord; length += 7) {
    for (char letter : {'a', 'b'}) {
      const std::string word(length, letter);
      std::vector<TokenId> ids;
      for (std::size_t index = 0; index < length % 5 + 1; ++index) {
        ids.push_back(static_cast<TokenId>(length * 10 + index + (letter == 'b' ? 5 : 0)));
      }
      cache.insert(word, hash_bytes(word), ids.data(), ids.size());
      kept[word] = ids;
    }
  }
  for (const auto& [word, ids] : kept) {
    std::size_t count = 0;
    const TokenId* found = cache.find(word, hash_bytes(word), count);
    ASSERT_NE(found, nullptr) << word.size();
    EXPECT_EQ(std::vector<TokenId>(found, found + count), ids) << word.size();
    std::string other = word;
    other.back() = 'c';
    EXPECT_EQ(cache.find(other, hash_bytes(other), count), nullptr);
  }
}

TEST(ByteTrie, FindsTheLongestEntryForStringsThatShareLongPrefixes) {
  // Strings over four bytes (zero and 0xFF among them), 1-12 long: many
  // share their first eight bytes, and some differ from another only by a
  // trailing zero byte, which the build's sort must still order as the
  // bytes do. Small and large tries (the large one takes its first two
  // bytes from a table).
  const std::string alphabet{'\0', 'a', 'b', '\xff'};
  for (std::size_t count : {300U, 6000U}) {
    std::mt19937_64 random(count);
    std::map<std::string, TokenId> entries;
    while (entries.size() < count) {
      std::string text(1 + random() % 12, 'a');
      for (char& byte : text) byte = alphabet[random() % alphabet.size()];
      entries.emplace(text, static_cast<TokenId>(entries.size()));
    }
    ByteTrie::Entries listed(entries.begin(), entries.end());
    std::shuffle(listed.begin(), listed.end(), random);
    std::map<TokenId, TokenId> shorter_of;
    ByteTrie trie;
    trie.build(listed, [&shorter_of](TokenId id, TokenId shorter) { shorter_of[id] = shorter; });
    auto longest_entry = [&entries](std::string_view text, std::size_t below) {
      for (std::size_t length = std::min(text.size(), below); length > 0; --length) {
        if (auto found = entries.find(std::string(text.substr(0, length))); found != entries.end()) {
          return found->second;
        }
      }
      return kNoToken;
    };
    for (const auto& [text, id] : entries) {
      ASSERT_EQ(shorter_of.at(id), longest_entry(text, text.size() - 1)) << count;
    }
    for (int probe = 0; probe < 20'000; ++probe) {
      std::string text(1 + random() % 16, 'a');
      for (char& byte : text) byte = alphabet[random() % alphabet.size()];
      ASSERT_EQ(trie.longest_match(text), longest_entry(text, text.size())) << count;
    }
  }
}

}  // namespace
}  // namespace kvgate::tokenizer
