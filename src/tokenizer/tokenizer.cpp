#include <algorithm>
#include <filesystem>

#include "kvgate/core/file.hpp"
#include "kvgate/core/utf8.hpp"
#include "kvgate/tokenizer/hf_tokenizer.hpp"
#include "tokenizer_file.hpp"
#include "tokenizer_impl.hpp"

namespace kvgate::tokenizer {

EncodeWorkspace::EncodeWorkspace() : state_(std::make_unique<State>()) {}
EncodeWorkspace::~EncodeWorkspace() = default;
std::uint64_t EncodeWorkspace::word_cache_hits() const {
  std::uint64_t hits = 0;
  for (const auto& [owner, scratch] : state_->bpe) {
    hits += scratch->cache.hits();
  }
  return hits;
}
std::uint64_t EncodeWorkspace::word_cache_misses() const {
  std::uint64_t misses = 0;
  for (const auto& [owner, scratch] : state_->bpe) {
    misses += scratch->cache.misses();
  }
  return misses;
}
std::uint64_t EncodeWorkspace::backtracked_words() const {
  std::uint64_t words = 0;
  for (const auto& [owner, scratch] : state_->bpe) {
    words += scratch->backtrack.words;
  }
  return words;
}

namespace {

// Shorter sections encode faster than a cache lookup pays for.
constexpr std::size_t kSmallestCachedSection = 64;

// The reference trims the neighbours of lstrip/rstrip tokens, then treats a
// section as a token when its text is a token's content.
void strip_around_tokens(const Tokenizer::Impl& impl, std::vector<Section>& sections) {
  for (std::size_t index = 0; index < sections.size(); ++index) {
    if (sections[index].token < 0) {
      continue;
    }
    const AddedToken& token = impl.added[static_cast<std::size_t>(sections[index].token)];
    if (token.lstrip && index > 0) {
      sections[index - 1].text = trim_end_javascript(sections[index - 1].text);
    }
    if (token.rstrip && index + 1 < sections.size()) {
      sections[index + 1].text = trim_start_javascript(sections[index + 1].text);
    }
  }
}

int token_of(const Tokenizer::Impl& impl, std::string_view text) {
  // Prompts are mostly long plain sections; only one as short as a token
  // can be one.
  if (impl.added_by_content.empty() || text.size() > impl.longest_added) {
    return -1;
  }
  auto found = impl.added_by_content.find(text);
  return found == impl.added_by_content.end() ? -1 : found->second;
}

void fuse_unknown_ids(std::vector<TokenId>& ids, std::size_t first, TokenId unknown) {
  auto end = std::unique(ids.begin() + static_cast<std::ptrdiff_t>(first), ids.end(),
                         [unknown](TokenId left, TokenId right) { return left == unknown && right == unknown; });
  ids.erase(end, ids.end());
}

void encode_plain(const Tokenizer::Impl& impl, std::string_view text, bool first_section, EncodeWorkspace::State& state,
                  std::vector<TokenId>& ids) {
  std::size_t first = ids.size();
  PreTokenizeContext context{state.match, first_section};
  BpeScratch& bpe = state.bpe_for(impl.instance);
  auto encode_word = [&](std::string_view word) { impl.model->encode_word(word, ids, bpe); };
  if (impl.pre_tokenizer) {
    impl.pre_tokenizer->split(text, context, encode_word);
  } else {
    encode_word(text);
  }
  if (impl.fuse_unknown && impl.model->options().unknown != kNoToken) {
    fuse_unknown_ids(ids, first, impl.model->options().unknown);
  }
}

void encode_section(const Tokenizer::Impl& impl, std::string_view text, bool first_section,
                    EncodeWorkspace::State& state, std::vector<TokenId>& ids) {
  if (!impl.normalizer) {
    encode_plain(impl, text, first_section, state, ids);
    return;
  }
  std::string normalized(text);  // sections nest, so each level owns its text
  impl.normalizer->normalize(normalized);
  if (normalized.empty()) {
    return;
  }
  if (impl.normalized_splitter.empty()) {
    encode_plain(impl, normalized, first_section, state, ids);
    return;
  }
  std::vector<Section> subsections;
  impl.normalized_splitter.split(normalized, subsections);
  strip_around_tokens(impl, subsections);
  for (const Section& subsection : subsections) {
    if (subsection.text.empty()) {
      continue;
    }
    if (int token = token_of(impl, subsection.text); token >= 0) {
      ids.push_back(impl.added[static_cast<std::size_t>(token)].id);
    } else {
      encode_plain(impl, subsection.text, first_section, state, ids);
    }
  }
}

}  // namespace

Tokenizer Tokenizer::load_folder(const std::string& folder, LoadOptions options) {
  TokenizerFile file = read_tokenizer_file(folder + "/tokenizer.json");
  // Optional (a folder may hold tokenizer.json alone); one that is there
  // but unreadable is an error, not an empty config.
  std::string config_json = "{}";
  std::error_code error;
  if (std::filesystem::exists(folder + "/tokenizer_config.json", error)) {
    auto contents = read_whole_file(folder + "/tokenizer_config.json");
    if (!contents) {
      throw TokenizerLoadError(contents.error().message);
    }
    config_json = std::move(*contents);
  }
  return Tokenizer(build_tokenizer(file, config_json, options));
}

Tokenizer Tokenizer::load(std::string_view tokenizer_json, std::string_view tokenizer_config_json,
                          LoadOptions options) {
  return Tokenizer(build_tokenizer(parse_tokenizer_file(tokenizer_json), tokenizer_config_json, options));
}

Result<bool, std::string> Tokenizer::encode(std::string_view text, bool add_special_tokens, EncodeWorkspace& workspace,
                                            std::vector<TokenId>& ids, bool known_valid) const {
  if (!known_valid && !is_valid_utf8(text)) {
    return unexpected(std::string("text is not valid UTF-8"));
  }
  const Impl& impl = *impl_;
  auto& state = workspace.state();
  if (add_special_tokens) {
    ids.insert(ids.end(), impl.prefix_ids.begin(), impl.prefix_ids.end());
  }
  std::vector<Section>& sections = state.sections;
  sections.clear();
  impl.unnormalized_splitter.split(text, sections);
  strip_around_tokens(impl, sections);
  for (std::size_t index = 0; index < sections.size(); ++index) {
    std::string_view section = sections[index].text;
    if (section.empty()) {
      continue;
    }
    if (int token = token_of(impl, section); token >= 0) {
      ids.push_back(impl.added[static_cast<std::size_t>(token)].id);
    } else if (section.size() < kSmallestCachedSection || !impl.segments->enabled()) {
      encode_section(impl, section, index == 0, state, ids);
    } else if (impl.segments->append(section, index == 0, ids)) {
      workspace.count_segment(true);
    } else {
      workspace.count_segment(false);
      std::size_t first = ids.size();
      encode_section(impl, section, index == 0, state, ids);
      impl.segments->insert(section, index == 0,
                            std::vector<TokenId>(ids.begin() + static_cast<std::ptrdiff_t>(first), ids.end()));
    }
  }
  if (add_special_tokens) {
    ids.insert(ids.end(), impl.suffix_ids.begin(), impl.suffix_ids.end());
  }
  return true;
}

std::string Tokenizer::decode(std::span<const TokenId> ids, DecodeOptions options) const {
  const Impl& impl = *impl_;
  std::vector<std::string> tokens;
  tokens.reserve(ids.size());
  for (TokenId id : ids) {
    std::string_view token = impl.id_to_token.get(id);
    if (token.empty()) {
      token = impl.unknown_token;
    }
    if (token.empty()) {
      continue;
    }
    if (options.skip_special_tokens && impl.special_contents.contains(std::string(token))) {
      continue;
    }
    tokens.emplace_back(token);
  }
  if (!impl.decoder) {
    std::string joined;
    for (std::size_t index = 0; index < tokens.size(); ++index) {
      joined += (index ? " " : "") + tokens[index];
    }
    return joined;
  }
  impl.decoder->decode_chain(tokens);
  std::string joined;
  for (const auto& token : tokens) {
    joined += token;
  }
  return joined;
}

std::optional<TokenId> Tokenizer::token_to_id(std::string_view token) const {
  if (int added = token_of(*impl_, token); added >= 0) {
    return impl_->added[static_cast<std::size_t>(added)].id;
  }
  for (TokenId id = 0; id < impl_->id_to_token.size(); ++id) {
    if (impl_->id_to_token.get(id) == token) {
      return id;
    }
  }
  return std::nullopt;
}

const std::vector<AddedToken>& Tokenizer::added_tokens() const {
  return impl_->added;
}
const nlohmann::json& Tokenizer::config() const {
  return impl_->config;
}
std::size_t Tokenizer::vocabulary_size() const {
  return impl_->vocabulary_size;
}

void Tokenizer::prepare_long_words() const {
  impl_->model->prepare_backtracking();
}

std::size_t Tokenizer::memory_bytes() const {
  std::size_t bytes = impl_->model->memory_bytes();
  bytes += impl_->id_to_token.memory_bytes();
  return bytes;
}

}  // namespace kvgate::tokenizer
