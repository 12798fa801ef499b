// The tokenizer's pieces on small hand-built tokenizer.json files, where
// the expected ids follow from the rules by hand.
#include <gtest/gtest.h>

#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "kvgate/tokenizer/hf_tokenizer.hpp"

namespace kvgate::tokenizer {
namespace {

using json = nlohmann::json;

// GPT-2 byte-level: 'Ġ' is the space byte.
json byte_level_file() {
  json vocab = {{"a", 0}, {"b", 1}, {"c", 2}, {"Ġ", 3}, {"ab", 4}, {"abc", 5}, {"Ġa", 6}, {"bb", 7}, {"Ġab", 8}};
  return {
      {"version", "1.0"},
      {"added_tokens",
       json::array({{{"id", 9}, {"content", "<x>"}, {"special", true}, {"lstrip", true}, {"rstrip", true}},
                    {{"id", 10}, {"content", "<y>"}, {"special", true}}})},
      {"normalizer", nullptr},
      {"pre_tokenizer", {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", true}}},
      {"post_processor", nullptr},
      {"decoder", {{"type", "ByteLevel"}}},
      {"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", json::array({"b b", "a b", "ab c", "Ġ a", "Ġa b"})}}}};
}

std::vector<TokenId> encode(const Tokenizer& tokenizer, std::string_view text, bool special = false) {
  EncodeWorkspace workspace;
  std::vector<TokenId> ids;
  EXPECT_TRUE(tokenizer.encode(text, special, workspace, ids).has_value());
  return ids;
}

TEST(HfTokenizer, MergesLowestRankFirst) {
  auto tokenizer = Tokenizer::load(byte_level_file().dump(), "{}");
  EXPECT_EQ(encode(tokenizer, "abc"), (std::vector<TokenId>{5}));
  // "abb": b+b (rank 0) wins over a+b (rank 1), and a+bb is not a merge.
  EXPECT_EQ(encode(tokenizer, "abb"), (std::vector<TokenId>{0, 7}));
  // GPT-2's regex keeps the space with the word (" ab"); a+b (rank 1)
  // merges before Ġ+a (rank 3), and Ġ+ab is not a merge.
  EXPECT_EQ(encode(tokenizer, "abc ab"), (std::vector<TokenId>{5, 3, 4}));
  // Ġ+a first when no earlier merge takes the a: " a" -> "Ġa".
  EXPECT_EQ(encode(tokenizer, "c a"), (std::vector<TokenId>{2, 6}));
}

// SentencePiece style, as Gemma's: spaces become U+2581 and nothing splits
// the text, so a paragraph is one word, encoded piece by piece at markers.
// "x▁y" holds the marker after another character (a bridging token): no
// split where it occurs, so it still merges.
json sentencepiece_file() {
  json vocab = {
      {"a", 0},       {"b", 1},       {"x", 2},        {"y", 3},   {"\u2581", 4},   {"\u2581a", 5}, {"\u2581\u2581", 6},
      {"\u2581b", 7}, {"x\u2581", 8}, {"x\u2581y", 9}, {"ab", 10}, {"\u2581ab", 11}};
  return {{"version", "1.0"},
          {"added_tokens", json::array()},
          {"normalizer", {{"type", "Replace"}, {"pattern", {{"String", " "}}}, {"content", "\u2581"}}},
          {"pre_tokenizer", nullptr},
          {"post_processor", nullptr},
          {"decoder", nullptr},
          {"model",
           {{"type", "BPE"},
            {"vocab", vocab},
            {"merges",
             json::array({"\u2581 \u2581", "x \u2581", "x\u2581 y", "a b", "\u2581 ab", "\u2581 a", "\u2581 b"})}}}};
}

TEST(HfTokenizer, ALongSentencePieceWordEncodesAsItsPiecesWouldTogether) {
  auto tokenizer = Tokenizer::load(sentencepiece_file().dump(), "{}");
  // Long enough for the piece-wise path (over 48 bytes).
  std::string text = "ab";
  std::vector<TokenId> expected{10};
  for (int repeat = 0; repeat < 6; ++repeat) {
    // "  " is a run of markers (merged first); " x y" holds the bridge x▁y,
    // which a split before its marker would break into x and ▁y.
    text += " ab  b x y a";
    expected.insert(expected.end(), {11, 6, 1, 4, 9, 5});
  }
  text += " ";
  expected.push_back(4);
  EXPECT_EQ(encode(tokenizer, text), expected);
}

TEST(HfTokenizer, AddedTokensSplitTheTextAndStripTheirNeighbours) {
  auto tokenizer = Tokenizer::load(byte_level_file().dump(), "{}");
  // <x> strips the whitespace on both sides; <y> strips nothing.
  EXPECT_EQ(encode(tokenizer, "ab  <x>  ab"), (std::vector<TokenId>{4, 9, 4}));
  EXPECT_EQ(encode(tokenizer, "ab <y> ab"), (std::vector<TokenId>{4, 3, 10, 3, 4}));
}

// Plain text between added tokens is skipped by first byte: with few
// distinct first bytes by memchr for each, with many by a table per byte.
// Both find the same tokens, and a first byte that starts no token (the 'c'
// of "abcab") leaves the text plain.
TEST(HfTokenizer, AddedTokensAreFoundWithFewOrManyFirstBytes) {
  for (int extra : {0, 9}) {
    json file = byte_level_file();
    file["added_tokens"].push_back({{"id", 11}, {"content", "cc"}, {"special", true}});
    for (int index = 0; index < extra; ++index) {
      std::string content = std::string(1, static_cast<char>('!' + index)) + "q";
      file["added_tokens"].push_back({{"id", 12 + index}, {"content", content}, {"special", true}});
    }
    auto tokenizer = Tokenizer::load(file.dump(), "{}");
    EXPECT_EQ(encode(tokenizer, "abcabcc<y>ab"), (std::vector<TokenId>{5, 4, 11, 10, 4})) << extra << " more";
    EXPECT_EQ(encode(tokenizer, "cc"), (std::vector<TokenId>{11})) << extra << " more";
    EXPECT_EQ(encode(tokenizer, "abc"), (std::vector<TokenId>{5})) << extra << " more";
  }
}

TEST(HfTokenizer, InvalidUtf8IsAnErrorNotACrash) {
  auto tokenizer = Tokenizer::load(byte_level_file().dump(), "{}");
  EncodeWorkspace workspace;
  std::vector<TokenId> ids;
  auto result = tokenizer.encode("ab\xC3(", false, workspace, ids);
  ASSERT_FALSE(result.has_value());
  EXPECT_NE(result.error().find("UTF-8"), std::string::npos);
}

TEST(HfTokenizer, DecodesByteLevelTokensBackToText) {
  auto tokenizer = Tokenizer::load(byte_level_file().dump(), "{}");
  EXPECT_EQ(tokenizer.decode(encode(tokenizer, "abc ab<y>")), "abc ab<y>");
  EXPECT_EQ(tokenizer.decode(std::vector<TokenId>{10}, {.skip_special_tokens = true}), "");
}

json metaspace_file() {
  json vocab = {{"<unk>", 0}, {"<s>", 1}, {"▁", 2}, {"h", 3}, {"i", 4}, {"▁h", 5}, {"▁hi", 6}};
  for (int byte = 0; byte < 256; ++byte) {
    char name[8];
    std::snprintf(name, sizeof name, "<0x%02X>", byte);
    vocab[name] = 7 + byte;
  }
  return {{"added_tokens", json::array({{{"id", 1}, {"content", "<s>"}, {"special", true}}})},
          {"normalizer", {{"type", "Replace"}, {"pattern", {{"String", " "}}}, {"content", "▁"}}},
          {"pre_tokenizer", nullptr},
          {"post_processor",
           {{"type", "TemplateProcessing"},
            {"single", json::array({{{"SpecialToken", {{"id", "<s>"}, {"type_id", 0}}}},
                                    {{"Sequence", {{"id", "A"}, {"type_id", 0}}}}})},
            {"special_tokens", {{"<s>", {{"id", "<s>"}, {"ids", {1}}, {"tokens", {"<s>"}}}}}}}},
          {"decoder",
           {{"type", "Sequence"},
            {"decoders", json::array({{{"type", "Replace"}, {"pattern", {{"String", "▁"}}}, {"content", " "}},
                                      {{"type", "ByteFallback"}},
                                      {{"type", "Fuse"}}})}}},
          {"model",
           {{"type", "BPE"},
            {"unk_token", "<unk>"},
            {"byte_fallback", true},
            {"fuse_unk", true},
            {"vocab", vocab},
            {"merges", json::array({json::array({"▁", "h"}), json::array({"▁h", "i"})})}}}};
}

TEST(HfTokenizer, ByteFallbackSpellsUnknownCharactersAsBytes) {
  auto tokenizer = Tokenizer::load(metaspace_file().dump(), "{}");
  // " hi" -> "▁hi"; "€" is not in the vocabulary: its three UTF-8 bytes.
  EXPECT_EQ(encode(tokenizer, " hi€"), (std::vector<TokenId>{6, 7 + 0xE2, 7 + 0x82, 7 + 0xAC}));
  EXPECT_EQ(tokenizer.decode(encode(tokenizer, " hi€")), " hi€");
}

TEST(HfTokenizer, TheTemplatePostProcessorAddsSpecialTokensOnlyWhenAsked) {
  auto tokenizer = Tokenizer::load(metaspace_file().dump(), "{}");
  EXPECT_EQ(encode(tokenizer, " hi", true), (std::vector<TokenId>{1, 6}));
  EXPECT_EQ(encode(tokenizer, " hi", false), (std::vector<TokenId>{6}));
}

TEST(HfTokenizer, OneWorkspaceServesSeveralTokenizersWithoutMixingTheirCaches) {
  auto first = Tokenizer::load(byte_level_file().dump(), "{}");
  auto second = Tokenizer::load(metaspace_file().dump(), "{}");
  EncodeWorkspace shared;
  for (int round = 0; round < 3; ++round) {
    for (const auto* tokenizer : {&first, &second}) {
      std::vector<TokenId> ids;
      ASSERT_TRUE(tokenizer->encode(" hi abc", false, shared, ids).has_value());
      EXPECT_EQ(ids, encode(*tokenizer, " hi abc")) << "round " << round;
    }
  }
}

TEST(HfTokenizer, TheSegmentCacheGivesTheSameIdsAndCountsItsHits) {
  auto tokenizer = Tokenizer::load(byte_level_file().dump(), "{}");
  auto uncached =
      Tokenizer::load(byte_level_file().dump(), "{}", {.segment_cache_bytes = 0, .backtracking_encoder = false});
  std::string prompt;
  for (int turn = 0; turn < 4; ++turn) prompt += std::string(80, 'a') + " abc abb " + std::to_string(turn) + "<y>";
  EncodeWorkspace workspace;
  std::vector<TokenId> first;
  std::vector<TokenId> second;
  ASSERT_TRUE(tokenizer.encode(prompt, false, workspace, first).has_value());
  EXPECT_EQ(workspace.segment_cache_hits(), 0u);
  EXPECT_EQ(workspace.segment_cache_misses(), 4u);
  ASSERT_TRUE(tokenizer.encode(prompt, false, workspace, second).has_value());
  EXPECT_EQ(workspace.segment_cache_hits(), 4u);
  EXPECT_EQ(first, second);
  EXPECT_EQ(first, encode(uncached, prompt));
  // A thread with its own workspace still finds the sections.
  EncodeWorkspace other;
  std::vector<TokenId> third;
  ASSERT_TRUE(tokenizer.encode(prompt, false, other, third).has_value());
  EXPECT_EQ(other.segment_cache_hits(), 4u);
  EXPECT_EQ(third, first);
}

// The I/O threads share one tokenizer and its segment cache, each with its
// own workspace; under ThreadSanitizer this is the test that watches it.
// The words of 49 'a's and more also race to build the backtracking
// encoder's tables, which the expected ids (by the merge alone) never use.
TEST(HfTokenizer, ThreadsSharingATokenizerGetTheSameIds) {
  auto tokenizer = Tokenizer::load(byte_level_file().dump(), "{}", {.segment_cache_bytes = 4096});
  std::vector<std::string> prompts;
  for (int index = 0; index < 40; ++index) {
    prompts.push_back(std::string(30 + index, 'a') + " abc<y>abb " + std::to_string(index % 7) + "<y>");
  }
  auto uncached =
      Tokenizer::load(byte_level_file().dump(), "{}", {.segment_cache_bytes = 0, .backtracking_encoder = false});
  std::vector<std::vector<TokenId>> expected;
  for (const auto& prompt : prompts) {
    expected.push_back(encode(uncached, prompt));
  }
  std::atomic<int> mismatches{0};
  std::atomic<std::uint64_t> backtracked{0};
  const std::size_t tables = tokenizer.memory_bytes();
  auto work = [&] {
    EncodeWorkspace workspace;
    for (int round = 0; round < 20; ++round) {
      for (std::size_t index = 0; index < prompts.size(); ++index) {
        std::vector<TokenId> ids;
        if (!tokenizer.encode(prompts[index], false, workspace, ids).has_value() || ids != expected[index]) {
          ++mismatches;
        }
      }
      EXPECT_GE(tokenizer.memory_bytes(), tables);
    }
    backtracked += workspace.backtracked_words();
  };
  std::thread first(work);
  std::thread second(work);
  first.join();
  second.join();
  EXPECT_EQ(mismatches.load(), 0);
  EXPECT_GT(backtracked.load(), 0u);
  EXPECT_GT(tokenizer.memory_bytes(), tables) << "the encoder's tables count once built";
}

TEST(HfTokenizer, MalformedFilesFailToLoadWithAReason) {
  EXPECT_THROW(Tokenizer::load("{not json", "{}"), TokenizerLoadError);
  auto file = byte_level_file();
  file["pre_tokenizer"] = {{"type", "NoSuchThing"}};
  try {
    Tokenizer::load(file.dump(), "{}");
    FAIL() << "loaded an unknown pre_tokenizer";
  } catch (const TokenizerLoadError& error) {
    EXPECT_NE(std::string(error.what()).find("NoSuchThing"), std::string::npos);
  }
  file = byte_level_file();
  file["model"]["type"] = "Unigram";
  EXPECT_THROW(Tokenizer::load(file.dump(), "{}"), TokenizerLoadError);
}

// load_folder reads tokenizer.json into the parser's padded buffer itself
// (not through load()): the same tokenizer, and the same errors.
TEST(HfTokenizer, AFolderLoadsAsItsTextDoes) {
  const auto folder = std::filesystem::temp_directory_path() / ("kvgate-tokenizer-" + std::to_string(::getpid()));
  std::filesystem::create_directories(folder);
  const auto write = [&](const std::string& text) { std::ofstream(folder / "tokenizer.json") << text; };
  const std::string text = byte_level_file().dump();
  write(text);
  const Tokenizer from_folder = Tokenizer::load_folder(folder.string());
  const Tokenizer from_text = Tokenizer::load(text, "{}");
  for (const std::string sample : {"hello world", "aaaa bbbb ab", "", "  \n\t x"}) {
    EXPECT_EQ(encode(from_folder, sample), encode(from_text, sample)) << sample;
  }
  write("{\"model\": [1, 2");
  try {
    (void)Tokenizer::load_folder(folder.string());
    FAIL() << "loaded a truncated tokenizer.json";
  } catch (const TokenizerLoadError& error) {
    EXPECT_NE(std::string(error.what()).find("tokenizer.json"), std::string::npos) << error.what();
  }
  std::filesystem::remove_all(folder);
  try {
    (void)Tokenizer::load_folder(folder.string());
    FAIL() << "loaded a folder that does not exist";
  } catch (const TokenizerLoadError& error) {
    EXPECT_NE(std::string(error.what()).find("cannot read"), std::string::npos) << error.what();
  }
}

}  // namespace
}  // namespace kvgate::tokenizer
