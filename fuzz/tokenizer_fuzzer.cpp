// Arbitrary bytes against the tokenizer: the first byte picks the target.
//   even: the bytes as text to encode with the real Qwen3 tokenizer (invalid
//         UTF-8 must be an error; valid text must encode, to the same ids
//         with and without the backtracking encoder, and decoding the ids
//         must give back the text when it is already NFC);
//   odd:  the bytes as a tokenizer.json (it loads or throws TokenizerLoadError;
//         what loads encodes long words alike with and without the
//         backtracking encoder).
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "kvgate/core/utf8.hpp"
#include "kvgate/tokenizer/hf_tokenizer.hpp"

using kvgate::tokenizer::Tokenizer;

namespace {
const Tokenizer& qwen3() {
  static const Tokenizer tokenizer = Tokenizer::load_folder(KVGATE_TOKENIZERS_DIR "/qwen3");
  return tokenizer;
}
const Tokenizer& qwen3_merging() {
  static const Tokenizer tokenizer =
      Tokenizer::load_folder(KVGATE_TOKENIZERS_DIR "/qwen3", {.segment_cache_bytes = 0, .backtracking_encoder = false});
  return tokenizer;
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  std::string text(reinterpret_cast<const char*>(data) + 1, size - 1);
  if (data[0] % 2 == 1) {
    try {
      auto loaded = Tokenizer::load(text, "{}");
      kvgate::tokenizer::EncodeWorkspace workspace;
      std::vector<kvgate::TokenId> ids;
      (void)loaded.encode("fuzz text 123 <|x|>", true, workspace, ids);
      auto merging = Tokenizer::load(text, "{}", {.segment_cache_bytes = 0, .backtracking_encoder = false});
      const std::string long_word = "abcabcabcaabbccabcbacbabcabcabcbcbcbaaabbbcccabcabacbcabcabcbabcabcabcbac";
      std::vector<kvgate::TokenId> fast;
      std::vector<kvgate::TokenId> merged;
      kvgate::tokenizer::EncodeWorkspace merging_workspace;
      if (loaded.encode(long_word, false, workspace, fast).has_value() &&
          merging.encode(long_word, false, merging_workspace, merged).has_value() && fast != merged) {
        __builtin_trap();
      }
    } catch (const kvgate::tokenizer::TokenizerLoadError&) {
    }
    return 0;
  }
  static kvgate::tokenizer::EncodeWorkspace workspace;
  std::vector<kvgate::TokenId> ids;
  auto encoded = qwen3().encode(text, false, workspace, ids);
  if (encoded.has_value() != kvgate::is_valid_utf8(text)) __builtin_trap();
  static kvgate::tokenizer::EncodeWorkspace merging_workspace;
  std::vector<kvgate::TokenId> merged;
  if (encoded && (!qwen3_merging().encode(text, false, merging_workspace, merged) || merged != ids)) __builtin_trap();
  if (encoded && text.find_first_of("\xCC\xCD") == std::string::npos && text.find('\xE1') == std::string::npos) {
    // Without combining marks or Hangul jamo the text is NFC already, and
    // byte-level decoding is exact.
    if (qwen3().decode(ids) != text && !ids.empty()) {
      bool ascii = true;
      for (char byte : text) ascii = ascii && static_cast<unsigned char>(byte) < 0x80;
      if (ascii) __builtin_trap();
    }
  }
  return 0;
}
