// kvgate's tokenizer against the reference: every document of the committed
// corpus (tests/tokenizer/golden/corpus.jsonl.gz) encoded with each real
// tokenizer must give the ids @huggingface/tokenizers gave
// (tools/goldens/make_goldens.mjs), and decode back to the same text.
#include <gtest/gtest.h>

#include <iostream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "../../bench/support/adversarial_text.hpp"
#include "../support/gzip_file.hpp"
#include "kvgate/tokenizer/hf_tokenizer.hpp"

namespace kvgate::tokenizer {
namespace {

using json = nlohmann::json;

std::vector<json> read_json_lines_gz(const std::string& path) {
  std::string text = test_support::read_gzip_file(path);
  EXPECT_FALSE(text.empty()) << "cannot read " << path;
  std::vector<json> lines;
  std::size_t start = 0;
  for (std::size_t end; (end = text.find('\n', start)) != std::string::npos; start = end + 1) {
    if (end > start) lines.push_back(json::parse(text.substr(start, end - start)));
  }
  return lines;
}

// 64-bit FNV-1a, as make_goldens.mjs computes it.
std::string fnv_hex(std::string_view bytes) {
  std::uint64_t hash = 0xcbf29ce484222325ULL;
  for (char byte : bytes) hash = (hash ^ static_cast<unsigned char>(byte)) * 0x100000001b3ULL;
  char out[17];
  std::snprintf(out, sizeof out, "%016llx", static_cast<unsigned long long>(hash));
  return out;
}

std::string fnv_ids(const std::vector<TokenId>& ids) {
  std::string bytes;
  for (TokenId id : ids) {
    for (int shift = 0; shift < 32; shift += 8) bytes.push_back(static_cast<char>((id >> shift) & 0xFF));
  }
  return fnv_hex(bytes);
}

std::string describe_difference(const std::vector<TokenId>& actual, const json& expected) {
  std::size_t index = 0;
  while (index < actual.size() && index < expected.size() && actual[index] == expected[index].get<TokenId>()) ++index;
  return "first difference at id " + std::to_string(index) + " of " + std::to_string(expected.size());
}

class Golden : public testing::TestWithParam<std::string> {};

TEST_P(Golden, EveryCorpusDocumentMatchesTheReference) {
  const std::string family = GetParam();
  auto tokenizer = Tokenizer::load_folder(std::string(KVGATE_TOKENIZERS_DIR) + "/" + family);
  auto corpus = read_json_lines_gz(std::string(KVGATE_GOLDEN_DIR) + "/corpus.jsonl.gz");
  auto golden = read_json_lines_gz(std::string(KVGATE_GOLDEN_DIR) + "/" + family + ".jsonl.gz");
  ASSERT_EQ(corpus.size(), golden.size());
  ASSERT_GT(corpus.size(), 500u);
  EncodeWorkspace workspace;
  int failures = 0;
  std::size_t tokens = 0;
  for (std::size_t index = 0; index < corpus.size() && failures < 5; ++index) {
    const auto text = corpus[index]["text"].get<std::string>();
    const json& expected = golden[index];
    std::vector<TokenId> ids;
    ASSERT_TRUE(tokenizer.encode(text, false, workspace, ids).has_value());
    tokens += ids.size();
    std::string where =
        family + " document " + std::to_string(index) + " (" + corpus[index]["kind"].get<std::string>() + ")";
    bool same = ids.size() == expected["count"].get<std::size_t>() && fnv_ids(ids) == expected["ids_fnv"];
    if (!same) {
      ++failures;
      ADD_FAILURE() << where << ": " << ids.size() << " ids, reference " << expected["count"]
                    << (expected.contains("ids") ? "; " + describe_difference(ids, expected["ids"]) : "");
      continue;
    }
    if (expected.contains("with_special")) {
      std::vector<TokenId> with_special;
      ASSERT_TRUE(tokenizer.encode(text, true, workspace, with_special).has_value());
      EXPECT_EQ(json(with_special), expected["with_special"]) << where << " with special tokens";
    }
    std::string decoded = ids.empty() ? "" : tokenizer.decode(ids);
    if (fnv_hex(decoded) != expected["decoded_fnv"]) {
      ++failures;
      ADD_FAILURE() << where << ": decoding differs from the reference";
    }
  }
  EXPECT_EQ(failures, 0);
  EXPECT_GT(tokens, 500'000u);  // the whole corpus was encoded
}

INSTANTIATE_TEST_SUITE_P(Families, Golden, testing::Values("qwen3", "llama3_1", "deepseek_v3", "gemma3", "gptoss"));

class LongWords : public testing::TestWithParam<std::string> {};

// The backtracking encoder against the pair-by-pair merge (which the
// corpus goldens pin to the reference), on the adversarial kinds of text.
TEST_P(LongWords, TheBacktrackingEncoderGivesTheMergesIds) {
  const std::string folder = std::string(KVGATE_TOKENIZERS_DIR) + "/" + GetParam();
  const auto fast = Tokenizer::load_folder(folder, LoadOptions{.segment_cache_bytes = 0});
  const auto merged =
      Tokenizer::load_folder(folder, LoadOptions{.segment_cache_bytes = 0, .backtracking_encoder = false});
  EncodeWorkspace fast_workspace;
  EncodeWorkspace merged_workspace;
  for (const std::string_view kind : {"letters", "whitespace", "base64", "json", "cjk", "mixed"}) {
    for (std::uint64_t seed = 1; seed <= 3; ++seed) {
      const std::string text = bench::adversarial_text(kind, seed, 60'000);
      std::vector<TokenId> fast_ids;
      std::vector<TokenId> merged_ids;
      ASSERT_TRUE(fast.encode(text, false, fast_workspace, fast_ids).has_value());
      ASSERT_TRUE(merged.encode(text, false, merged_workspace, merged_ids).has_value());
      ASSERT_EQ(fast_ids.size(), merged_ids.size()) << GetParam() << " " << kind << " seed " << seed;
      EXPECT_EQ(fast_ids, merged_ids) << GetParam() << " " << kind << " seed " << seed;
    }
    if (kind == std::string_view("letters")) {
      // Every family's encoder takes these (no whitespace runs, which some
      // merge lists make out of rank order).
      EXPECT_GT(fast_workspace.backtracked_words(), 50u) << GetParam();
    }
  }
  EXPECT_EQ(merged_workspace.backtracked_words(), 0u);
  std::cout << GetParam() << ": " << fast_workspace.backtracked_words() << " words backtracked\n";
}

INSTANTIATE_TEST_SUITE_P(Families, LongWords, testing::Values("qwen3", "llama3_1", "deepseek_v3", "gemma3", "gptoss"));

}  // namespace
}  // namespace kvgate::tokenizer
