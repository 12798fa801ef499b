#include "tokenizer_file.hpp"

#include "kvgate/jsonio/from_simdjson.hpp"
#include "kvgate/tokenizer/hf_tokenizer.hpp"

namespace kvgate::tokenizer {

namespace {

using json = nlohmann::json;
namespace dom = simdjson::dom;

[[noreturn]] void fail(const std::string& message) {
  throw TokenizerLoadError("tokenizer.json: " + message);
}

void read_vocabulary(dom::object vocab, VocabularyEntries& out) {
  out.reserve(vocab.size());
  for (dom::key_value_pair field : vocab) {
    std::uint64_t id = 0;
    if (field.value.get_uint64().get(id) != simdjson::SUCCESS) {
      fail("model.vocab values must be token ids (non-negative integers)");
    }
    if (id > UINT32_MAX - 1) {
      fail("token id out of range");
    }
    out.emplace_back(field.key, static_cast<TokenId>(id));
  }
}

void read_merges(dom::array merges, MergeEntries& out) {
  out.reserve(merges.size());
  for (dom::element entry : merges) {
    if (entry.is_string()) {  // legacy form: "left right"
      std::string_view text(entry);
      auto space = text.find(' ');
      if (space == std::string_view::npos) {
        fail("merge without a space: " + std::string(text));
      }
      auto end = text.find(' ', space + 1);  // the reference keeps only the first two parts
      out.emplace_back(text.substr(0, space), text.substr(space + 1, end - space - 1));
      continue;
    }
    dom::array parts;
    if (entry.get_array().get(parts) != simdjson::SUCCESS) {
      fail("a merge must be a string or an array of two strings");
    }
    std::string_view left;
    std::string_view right;
    if (parts.size() != 2 || parts.at(0).get_string().get(left) != simdjson::SUCCESS ||
        parts.at(1).get_string().get(right) != simdjson::SUCCESS) {
      fail("merge entry without two string parts");
    }
    out.emplace_back(left, right);
  }
}

}  // namespace

namespace {

TokenizerFile parse_padded(const simdjson::padded_string& text) {
  auto parser = std::make_shared<dom::parser>();
  dom::element root;
  if (auto error = parser->parse(text).get(root); error != simdjson::SUCCESS) {
    fail(simdjson::error_message(error));
  }
  dom::object root_object;
  if (root.get_object().get(root_object) != simdjson::SUCCESS) {
    fail("not a JSON object");
  }
  TokenizerFile file;
  file.document = json::object();
  for (dom::key_value_pair field : root_object) {
    dom::object model;
    if (field.key != "model" || field.value.get_object().get(model) != simdjson::SUCCESS) {
      file.document[std::string(field.key)] = jsonio::from_simdjson<json>(field.value);
      continue;
    }
    json& model_json = file.document["model"] = json::object();
    for (dom::key_value_pair member : model) {
      if (dom::object vocab; member.key == "vocab" && member.value.get_object().get(vocab) == simdjson::SUCCESS) {
        file.vocabulary.clear();
        read_vocabulary(vocab, file.vocabulary);
      } else if (dom::array merges;
                 member.key == "merges" && member.value.get_array().get(merges) == simdjson::SUCCESS) {
        file.merges.clear();
        read_merges(merges, file.merges);
      } else {
        model_json[std::string(member.key)] = jsonio::from_simdjson<json>(member.value);
      }
    }
  }
  file.storage = std::move(parser);
  return file;
}

}  // namespace

TokenizerFile parse_tokenizer_file(std::string_view text) {
  return parse_padded(simdjson::padded_string(text));
}

TokenizerFile read_tokenizer_file(const std::string& path) {
  simdjson::padded_string text;
  if (simdjson::padded_string::load(path).get(text) != simdjson::SUCCESS) {
    throw TokenizerLoadError("cannot read " + path);
  }
  return parse_padded(text);
}

}  // namespace kvgate::tokenizer
