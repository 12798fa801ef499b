#include "normalizer.hpp"

#include <utf8proc.h>

#include <algorithm>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <vector>

#include "kvgate/tokenizer/hf_tokenizer.hpp"
#include "kvgate/tokenizer/utf8.hpp"
#include "regex.hpp"

namespace kvgate::tokenizer {

namespace {

bool is_ascii(const std::string& text) {
  return std::all_of(text.begin(), text.end(), [](char symbol) { return static_cast<unsigned char>(symbol) < 0x80; });
}

class UnicodeForm final : public Normalizer {
 public:
  explicit UnicodeForm(int options) : options_(options) {}
  void normalize(std::string& text) const override {
    if (is_ascii(text)) return;  // every normalization form leaves ASCII alone
    utf8proc_uint8_t* result = nullptr;
    auto length =
        utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(text.data()), static_cast<utf8proc_ssize_t>(text.size()),
                     &result, static_cast<utf8proc_option_t>(options_));
    if (length >= 0) text.assign(reinterpret_cast<char*>(result), static_cast<std::size_t>(length));
    std::free(result);  // NOLINT(cppcoreguidelines-no-malloc): utf8proc allocates with malloc
  }

 private:
  int options_;
};

class Replace final : public Normalizer {
 public:
  Replace(Regex pattern, std::string content) : pattern_(std::move(pattern)), content_(std::move(content)) {}
  void normalize(std::string& text) const override {
    MatchScratch scratch;
    std::string out;
    std::size_t position = 0;
    std::size_t search = 0;
    while (search <= text.size()) {
      MatchSpan match = pattern_.find(text, search, scratch);
      if (match.end == std::string::npos) break;
      out.append(text, position, match.begin - position);
      out += content_;
      position = match.end;
      search = match.end > match.begin ? match.end : match.end + utf8_sequence_length(text[match.end]);
    }
    if (position == 0 && out.empty()) return;
    out.append(text, std::min(position, text.size()));
    text = std::move(out);
  }

 private:
  Regex pattern_;
  std::string content_;
};

class Prepend final : public Normalizer {
 public:
  explicit Prepend(std::string prefix) : prefix_(std::move(prefix)) {}
  void normalize(std::string& text) const override { text.insert(0, prefix_); }

 private:
  std::string prefix_;
};

class Lowercase final : public Normalizer {
 public:
  void normalize(std::string& text) const override {
    std::string out;
    out.reserve(text.size());
    std::size_t position = 0;
    while (position < text.size()) {
      append_utf8(
          out, static_cast<char32_t>(utf8proc_tolower(static_cast<utf8proc_int32_t>(next_code_point(text, position)))));
    }
    text = std::move(out);
  }
};

class Strip final : public Normalizer {
 public:
  Strip(bool left, bool right) : left_(left), right_(right) {}
  void normalize(std::string& text) const override {
    std::string_view view = text;
    if (left_) view = trim_start_javascript(view);
    if (right_) view = trim_end_javascript(view);
    text = std::string(view);
  }

 private:
  bool left_;
  bool right_;
};

class Sequence final : public Normalizer {
 public:
  explicit Sequence(std::vector<std::unique_ptr<Normalizer>> steps) : steps_(std::move(steps)) {}
  void normalize(std::string& text) const override {
    for (const auto& step : steps_) step->normalize(text);
  }

 private:
  std::vector<std::unique_ptr<Normalizer>> steps_;
};

}  // namespace

Regex pattern_from_spec(const nlohmann::json& pattern) {
  if (pattern.contains("String")) return Regex::literal(pattern["String"].get<std::string>());
  if (pattern.contains("Regex")) {
    auto compiled = Regex::compile(pattern["Regex"].get<std::string>());
    if (!compiled) throw TokenizerLoadError(compiled.error());
    return std::move(compiled).value();
  }
  throw TokenizerLoadError("pattern must have String or Regex: " + pattern.dump());
}

std::unique_ptr<Normalizer> make_normalizer(const nlohmann::json& spec) {
  if (spec.is_null()) return nullptr;
  auto type = spec.at("type").get<std::string>();
  if (type == "NFC") return std::make_unique<UnicodeForm>(UTF8PROC_STABLE | UTF8PROC_COMPOSE);
  if (type == "NFD") return std::make_unique<UnicodeForm>(UTF8PROC_STABLE | UTF8PROC_DECOMPOSE);
  if (type == "NFKC") return std::make_unique<UnicodeForm>(UTF8PROC_STABLE | UTF8PROC_COMPOSE | UTF8PROC_COMPAT);
  if (type == "NFKD") return std::make_unique<UnicodeForm>(UTF8PROC_STABLE | UTF8PROC_DECOMPOSE | UTF8PROC_COMPAT);
  if (type == "Replace") {
    return std::make_unique<Replace>(pattern_from_spec(spec.at("pattern")), spec.value("content", std::string()));
  }
  if (type == "Prepend") return std::make_unique<Prepend>(spec.at("prepend").get<std::string>());
  if (type == "Lowercase") return std::make_unique<Lowercase>();
  if (type == "Strip") return std::make_unique<Strip>(spec.value("strip_left", true), spec.value("strip_right", true));
  if (type == "Sequence") {
    std::vector<std::unique_ptr<Normalizer>> steps;
    for (const auto& step : spec.at("normalizers")) {
      if (auto made = make_normalizer(step)) steps.push_back(std::move(made));
    }
    return std::make_unique<Sequence>(std::move(steps));
  }
  throw TokenizerLoadError("unsupported normalizer type " + type);
}

}  // namespace kvgate::tokenizer
