#include <atomic>
#include <nlohmann/json.hpp>

#include "tokenizer_file.hpp"
#include "tokenizer_impl.hpp"

namespace kvgate::tokenizer {

namespace {

using json = nlohmann::json;

TokenId lookup_id(const Tokenizer::Impl& impl, const std::string& token) {
  if (auto found = impl.added_by_content.find(token); found != impl.added_by_content.end()) {
    return impl.added[static_cast<std::size_t>(found->second)].id;
  }
  for (TokenId id = 0; id < impl.id_to_token.size(); ++id) {
    if (impl.id_to_token.get(id) == token) {
      return id;
    }
  }
  throw TokenizerLoadError("post_processor names unknown token " + token);
}

// Flattens a post-processor into the ids it puts before and after a single
// sequence. Pairs of sequences are never encoded by kvgate.
void load_post_processor(const json& spec, Tokenizer::Impl& impl) {
  if (spec.is_null()) {
    return;
  }
  auto type = spec.at("type").get<std::string>();
  if (type == "ByteLevel") {
    return;  // only adjusts offsets
  }
  if (type == "Sequence") {
    for (const auto& step : spec.at("processors")) {
      load_post_processor(step, impl);
    }
    return;
  }
  std::vector<TokenId> before;
  std::vector<TokenId> after;
  if (type == "TemplateProcessing") {
    const json& special = spec.value("special_tokens", json::object());
    bool seen_sequence = false;
    for (const auto& item : spec.at("single")) {
      if (item.contains("Sequence")) {
        seen_sequence = true;
        continue;
      }
      auto name = item.at("SpecialToken").at("id").get<std::string>();
      std::vector<TokenId> ids;
      if (special.contains(name) && special[name].contains("ids")) {
        ids = special[name]["ids"].get<std::vector<TokenId>>();
      } else {
        ids.push_back(lookup_id(impl, name));
      }
      auto& target = seen_sequence ? after : before;
      target.insert(target.end(), ids.begin(), ids.end());
    }
  } else if (type == "BertProcessing" || type == "RobertaProcessing") {
    before.push_back(spec.at("cls").at(1).get<TokenId>());
    after.push_back(spec.at("sep").at(1).get<TokenId>());
  } else {
    throw TokenizerLoadError("unsupported post_processor type " + type);
  }
  // A later processor wraps what the earlier ones produced.
  impl.prefix_ids.insert(impl.prefix_ids.begin(), before.begin(), before.end());
  impl.suffix_ids.insert(impl.suffix_ids.end(), after.begin(), after.end());
}

void load_added_tokens(const json& list, Tokenizer::Impl& impl) {
  for (const auto& entry : list) {
    AddedToken token;
    token.content = entry.at("content").get<std::string>();
    token.id = entry.at("id").get<TokenId>();
    token.special = entry.value("special", false);
    token.lstrip = entry.value("lstrip", false);
    token.rstrip = entry.value("rstrip", false);
    token.normalized = entry.value("normalized", !token.special);
    impl.added.push_back(std::move(token));
  }
  for (std::size_t index = 0; index < impl.added.size(); ++index) {
    const AddedToken& token = impl.added[index];
    impl.longest_added = std::max(impl.longest_added, token.content.size() * 4);  // NFC can grow a normalised key
    int position = static_cast<int>(index);
    impl.added_by_content[token.content] = position;
    if (token.special) {
      impl.special_contents.insert(token.content);
    }
    if (token.normalized && impl.normalizer) {
      std::string normalized = token.content;
      impl.normalizer->normalize(normalized);
      impl.added_by_content[normalized] = position;
      impl.normalized_splitter.add(normalized, position);
    } else {
      impl.unnormalized_splitter.add(token.content, position);
    }
    impl.id_to_token.set(token.id, token.content);
  }
}

BpeOptions load_model_options(const json& model, const VocabularyEntries& vocabulary, bool byte_level) {
  auto type = model.value("type", std::string("BPE"));
  if (type != "BPE") {
    throw TokenizerLoadError("unsupported model type " + type + " (kvgate reads BPE models)");
  }
  if (!model.value("dropout", json()).is_null()) {
    throw TokenizerLoadError("BPE dropout is not deterministic");
  }
  for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"}) {
    if (model.contains(key) && model[key].is_string() && !model[key].get<std::string>().empty()) {
      throw TokenizerLoadError(std::string("unsupported BPE option ") + key);
    }
  }
  BpeOptions options;
  options.byte_level = byte_level;
  options.byte_fallback = model.value("byte_fallback", false);
  options.ignore_merges = model.value("ignore_merges", false);
  if (model.contains("unk_token") && model["unk_token"].is_string()) {
    auto name = model["unk_token"].get<std::string>();
    for (const auto& [token, id] : vocabulary) {
      if (token == name) {
        options.unknown = id;
      }
    }
  }
  return options;
}

}  // namespace

std::shared_ptr<Tokenizer::Impl> build_tokenizer(const TokenizerFile& file, std::string_view config_json,
                                                 const LoadOptions& options) {
  auto impl = std::make_shared<Tokenizer::Impl>();
  // Identifies the tokenizer to per-thread caches; a counter, because an
  // address can be reused after a reload frees the old tokenizer.
  static std::atomic<std::uint64_t> instances{0};
  impl->instance = ++instances;
  impl->segments = std::make_unique<SegmentCache>(options.segment_cache_bytes);
  try {
    impl->config = json::parse(config_json);
  } catch (const json::exception& error) {
    throw TokenizerLoadError(std::string("tokenizer_config.json: ") + error.what());
  }
  const json& document = file.document;
  try {
    impl->normalizer = make_normalizer(document.value("normalizer", json()));
    bool byte_level = false;
    impl->pre_tokenizer = make_pre_tokenizer(document.value("pre_tokenizer", json()), byte_level);
    const json& model = document.at("model");
    BpeOptions model_options = load_model_options(model, file.vocabulary, byte_level);
    model_options.backtracking = options.backtracking_encoder;
    impl->fuse_unknown = model.value("fuse_unk", false);
    if (model.contains("unk_token") && model["unk_token"].is_string()) {
      impl->unknown_token = model["unk_token"];
    }

    TokenId largest = 0;
    for (const auto& [token, id] : file.vocabulary) {
      largest = std::max(largest, id);
    }
    impl->id_to_token.resize(file.vocabulary.empty() ? 0 : largest + 1);
    for (const auto& [token, id] : file.vocabulary) {
      impl->id_to_token.set(id, token);
    }
    impl->vocabulary_size = file.vocabulary.size();

    impl->model = std::make_unique<BpeModel>(file.vocabulary, file.merges, model_options);
    load_added_tokens(document.value("added_tokens", json::array()), *impl);
    // Added tokens are also whole tokens to the model (the reference adds
    // them to its vocabulary map), in the model's alphabet.
    for (const auto& token : impl->added) {
      if (!byte_level) {
        impl->model->add_token(token.content, token.id);
      } else if (auto raw = byte_level_to_raw(token.content)) {
        impl->model->add_token(*raw, token.id);
      }
    }
    load_post_processor(document.value("post_processor", json()), *impl);
    auto contents = std::make_shared<std::unordered_set<std::string>>();
    for (const auto& token : impl->added) {
      contents->insert(token.content);
    }
    impl->decoder = make_decoder(document.value("decoder", json()), contents);
  } catch (const json::exception& error) {
    throw TokenizerLoadError(std::string("tokenizer.json: ") + error.what());
  }
  return impl;
}

}  // namespace kvgate::tokenizer
