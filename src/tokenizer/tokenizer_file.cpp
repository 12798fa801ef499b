#include "tokenizer_file.hpp"

#include "kvgate/tokenizer/hf_tokenizer.hpp"

namespace kvgate::tokenizer {

namespace {

using json = nlohmann::json;

class Handler final : public nlohmann::json_sax<json> {
 public:
  explicit Handler(TokenizerFile& file) : file_(file) {}

  bool null() override { return value(json(nullptr)); }
  bool boolean(bool flag) override { return value(json(flag)); }
  bool number_integer(number_integer_t number) override { return value(json(number)); }
  bool number_float(number_float_t number, const string_t& /*text*/) override { return value(json(number)); }
  bool binary(binary_t& /*bytes*/) override { return false; }

  bool number_unsigned(number_unsigned_t number) override {
    if (mode_ == Mode::kVocabulary) {
      if (number > UINT32_MAX - 1) {
        return fail("token id out of range");
      }
      file_.vocabulary.emplace_back(std::move(key_), static_cast<TokenId>(number));
      return true;
    }
    return value(json(number));
  }

  bool string(string_t& text) override {
    if (mode_ == Mode::kMerges) {
      if (merge_depth_ == 1) {  // legacy form: "left right"
        auto space = text.find(' ');
        if (space == std::string::npos) {
          return fail("merge without a space: " + text);
        }
        auto end = text.find(' ', space + 1);  // the reference keeps only the first two parts
        file_.merges.emplace_back(text.substr(0, space), text.substr(space + 1, end - space - 1));
      } else {
        merge_parts_.push_back(std::move(text));
      }
      return true;
    }
    return value(json(std::move(text)));
  }

  bool start_object(std::size_t /*size*/) override {
    if (mode_ != Mode::kDocument) {
      return fail("unexpected object in model.vocab or model.merges");
    }
    if (stack_.size() == 2 && stack_keys_.back() == "model" && key_ == "vocab") {
      mode_ = Mode::kVocabulary;
      return true;
    }
    return open(json::object());
  }

  bool key(string_t& text) override {
    key_ = std::move(text);
    return true;
  }

  bool end_object() override {
    if (mode_ == Mode::kVocabulary) {
      mode_ = Mode::kDocument;
      return true;
    }
    stack_.pop_back();
    stack_keys_.pop_back();
    return true;
  }

  bool start_array(std::size_t /*size*/) override {
    if (mode_ == Mode::kMerges) {
      if (++merge_depth_ > 2) {
        return fail("nested merge entry");
      }
      merge_parts_.clear();
      return true;
    }
    if (mode_ == Mode::kVocabulary) {
      return fail("array in model.vocab");
    }
    if (stack_.size() == 2 && stack_keys_.back() == "model" && key_ == "merges") {
      mode_ = Mode::kMerges;
      merge_depth_ = 1;
      return true;
    }
    return open(json::array());
  }

  bool end_array() override {
    if (mode_ == Mode::kMerges) {
      if (merge_depth_-- == 1) {
        mode_ = Mode::kDocument;
        return true;
      }
      if (merge_parts_.size() != 2) {
        return fail("merge entry without two parts");
      }
      file_.merges.emplace_back(std::move(merge_parts_[0]), std::move(merge_parts_[1]));
      return true;
    }
    stack_.pop_back();
    stack_keys_.pop_back();
    return true;
  }

  bool parse_error(std::size_t /*position*/, const std::string& /*token*/,
                   const nlohmann::detail::exception& error) override {
    return fail(error.what());
  }

  [[nodiscard]] const std::string& error() const { return error_; }

 private:
  enum class Mode { kDocument, kVocabulary, kMerges };

  bool fail(std::string message) {
    error_ = std::move(message);
    return false;
  }

  json* place(json&& item) {
    if (stack_.empty()) {
      file_.document = std::move(item);
      return &file_.document;
    }
    json& parent = *stack_.back();
    if (parent.is_object()) {
      return &(parent[key_] = std::move(item));
    }
    parent.push_back(std::move(item));
    return &parent.back();
  }

  bool value(json&& item) {
    if (mode_ != Mode::kDocument) {
      return fail("unexpected value in model.vocab or model.merges");
    }
    place(std::move(item));
    return true;
  }

  bool open(json&& container) {
    std::string key = stack_.empty() || !stack_.back()->is_object() ? std::string() : key_;
    stack_.push_back(place(std::move(container)));
    stack_keys_.push_back(std::move(key));
    return true;
  }

  TokenizerFile& file_;
  Mode mode_ = Mode::kDocument;
  std::vector<json*> stack_;
  std::vector<std::string> stack_keys_;  // the key each open container sits under
  std::string key_;
  int merge_depth_ = 0;
  std::vector<std::string> merge_parts_;
  std::string error_;
};

}  // namespace

TokenizerFile parse_tokenizer_file(std::string_view text) {
  TokenizerFile file;
  Handler handler(file);
  bool parsed = json::sax_parse(text.begin(), text.end(), &handler, json::input_format_t::json, true);
  if (!parsed) {
    throw TokenizerLoadError("tokenizer.json: " + handler.error());
  }
  if (!file.document.is_object()) {
    throw TokenizerLoadError("tokenizer.json: not a JSON object");
  }
  return file;
}

}  // namespace kvgate::tokenizer
