#include "tokenizer_file.hpp"

#include <simdjson.h>

#include "kvgate/tokenizer/hf_tokenizer.hpp"

namespace kvgate::tokenizer {

namespace {

using json = nlohmann::json;
namespace dom = simdjson::dom;

[[noreturn]] void fail(const std::string& message) {
  throw TokenizerLoadError("tokenizer.json: " + message);
}

json to_json(dom::element element) {
  switch (element.type()) {
    case dom::element_type::OBJECT: {
      json object = json::object();
      for (dom::key_value_pair field : dom::object(element)) {
        object[std::string(field.key)] = to_json(field.value);  // a repeated key keeps its last value
      }
      return object;
    }
    case dom::element_type::ARRAY: {
      json array = json::array();
      for (dom::element item : dom::array(element)) {
        array.push_back(to_json(item));
      }
      return array;
    }
    case dom::element_type::STRING:
      return std::string(std::string_view(element));
    case dom::element_type::INT64:
      return std::int64_t(element);
    case dom::element_type::UINT64:
      return std::uint64_t(element);
    case dom::element_type::DOUBLE:
      return double(element);
    case dom::element_type::BOOL:
      return bool(element);
    case dom::element_type::NULL_VALUE:
      return nullptr;
  }
  return nullptr;
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

TokenizerFile parse_tokenizer_file(std::string_view text) {
  auto parser = std::make_shared<dom::parser>();
  const simdjson::padded_string padded(text);
  dom::element root;
  if (auto error = parser->parse(padded).get(root); error != simdjson::SUCCESS) {
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
      file.document[std::string(field.key)] = to_json(field.value);
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
        model_json[std::string(member.key)] = to_json(member.value);
      }
    }
  }
  file.storage = std::move(parser);
  return file;
}

}  // namespace kvgate::tokenizer
