#include "normalizer.hpp"

#include <utf8proc.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <vector>

#include "kvgate/core/utf8.hpp"
#include "kvgate/tokenizer/hf_tokenizer.hpp"
#include "regex.hpp"

namespace kvgate::tokenizer {

namespace {

bool is_ascii(const std::string& text) {
  return std::all_of(text.begin(), text.end(), [](char symbol) { return static_cast<unsigned char>(symbol) < 0x80; });
}

// Code points after which NFC may change the text: combining marks
// (canonical combining class > 0), characters NFC replaces (composition
// exclusions, singletons), and characters that compose with the one before
// them. Text without any of them is already NFC, which is almost all text,
// so the normaliser proper runs only when one appears. Derived once from
// utf8proc's own tables so the two never disagree.
class NfcUnsafe {
 public:
  NfcUnsafe() : bits_((0x110000 + 63) / 64) {
    for (utf8proc_int32_t code_point = 0x300; code_point < 0x110000; ++code_point) {
      const utf8proc_property_t* property = utf8proc_get_property(code_point);
      if (property->combining_class != 0 || property->comp_exclusion) {
        mark(code_point);
      }
      if (property->decomp_seqindex == UINT16_MAX || property->decomp_type != 0) {
        continue;
      }
      utf8proc_int32_t parts[8];
      int last_boundclass = 0;
      auto count = utf8proc_decompose_char(code_point, parts, 8, UTF8PROC_DECOMPOSE, &last_boundclass);
      if (count <= 1) {
        mark(code_point);  // a singleton decomposition: NFC replaces it
      }
      for (utf8proc_ssize_t index = 1; index < count; ++index) {
        mark(parts[index]);
      }
    }
    for (utf8proc_int32_t code_point = 0x1161; code_point <= 0x1175; ++code_point) {
      mark(code_point);  // Hangul V
    }
    for (utf8proc_int32_t code_point = 0x11A8; code_point <= 0x11C2; ++code_point) {
      mark(code_point);  // Hangul T
    }
  }
  [[nodiscard]] bool contains(char32_t code_point) const {
    return code_point < 0x110000 && ((bits_[code_point >> 6] >> (code_point & 63)) & 1) != 0;
  }

 private:
  void mark(utf8proc_int32_t code_point) {
    if (code_point >= 0 && code_point < 0x110000) {
      bits_[static_cast<std::size_t>(code_point) >> 6] |= 1ULL << (code_point & 63);
    }
  }
  std::vector<std::uint64_t> bits_;
};

bool may_change_under_nfc(const std::string& text) {
  static const NfcUnsafe kUnsafe;  // immutable after construction (thread-safe static init)
  std::size_t position = 0;
  while (position < text.size()) {
    if (static_cast<unsigned char>(text[position]) < 0x80) {
      ++position;
      continue;
    }
    if (kUnsafe.contains(next_code_point(text, position))) {
      return true;
    }
  }
  return false;
}

class UnicodeForm final : public Normalizer {
 public:
  explicit UnicodeForm(int options) : options_(options) {}
  void normalize(std::string& text) const override {
    if (is_ascii(text)) {
      return;  // every normalization form leaves ASCII alone
    }
    if (options_ == (UTF8PROC_STABLE | UTF8PROC_COMPOSE) && !may_change_under_nfc(text)) {
      return;
    }
    utf8proc_uint8_t* result = nullptr;
    auto length =
        utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(text.data()), static_cast<utf8proc_ssize_t>(text.size()),
                     &result, static_cast<utf8proc_option_t>(options_));
    if (length >= 0) {
      text.assign(reinterpret_cast<char*>(result), static_cast<std::size_t>(length));
    }
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
      if (match.end == std::string::npos) {
        break;
      }
      out.append(text, position, match.begin - position);
      out += content_;
      position = match.end;
      search = match.end > match.begin ? match.end : match.end + utf8_sequence_length(text[match.end]);
    }
    if (position == 0 && out.empty()) {
      return;
    }
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
    if (left_) {
      view = trim_start_javascript(view);
    }
    if (right_) {
      view = trim_end_javascript(view);
    }
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
    for (const auto& step : steps_) {
      step->normalize(text);
    }
  }

 private:
  std::vector<std::unique_ptr<Normalizer>> steps_;
};

}  // namespace

Regex pattern_from_spec(const nlohmann::json& pattern) {
  if (pattern.contains("String")) {
    return Regex::literal(pattern["String"].get<std::string>());
  }
  if (pattern.contains("Regex")) {
    auto compiled = Regex::compile(pattern["Regex"].get<std::string>());
    if (!compiled) {
      throw TokenizerLoadError(compiled.error());
    }
    return std::move(compiled).value();
  }
  throw TokenizerLoadError("pattern must have String or Regex: " + pattern.dump());
}

std::unique_ptr<Normalizer> make_normalizer(const nlohmann::json& spec) {
  if (spec.is_null()) {
    return nullptr;
  }
  auto type = spec.at("type").get<std::string>();
  if (type == "NFC") {
    return std::make_unique<UnicodeForm>(UTF8PROC_STABLE | UTF8PROC_COMPOSE);
  }
  if (type == "NFD") {
    return std::make_unique<UnicodeForm>(UTF8PROC_STABLE | UTF8PROC_DECOMPOSE);
  }
  if (type == "NFKC") {
    return std::make_unique<UnicodeForm>(UTF8PROC_STABLE | UTF8PROC_COMPOSE | UTF8PROC_COMPAT);
  }
  if (type == "NFKD") {
    return std::make_unique<UnicodeForm>(UTF8PROC_STABLE | UTF8PROC_DECOMPOSE | UTF8PROC_COMPAT);
  }
  if (type == "Replace") {
    return std::make_unique<Replace>(pattern_from_spec(spec.at("pattern")), spec.value("content", std::string()));
  }
  if (type == "Prepend") {
    return std::make_unique<Prepend>(spec.at("prepend").get<std::string>());
  }
  if (type == "Lowercase") {
    return std::make_unique<Lowercase>();
  }
  if (type == "Strip") {
    return std::make_unique<Strip>(spec.value("strip_left", true), spec.value("strip_right", true));
  }
  if (type == "Sequence") {
    std::vector<std::unique_ptr<Normalizer>> steps;
    for (const auto& step : spec.at("normalizers")) {
      if (auto made = make_normalizer(step)) {
        steps.push_back(std::move(made));
      }
    }
    return std::make_unique<Sequence>(std::move(steps));
  }
  throw TokenizerLoadError("unsupported normalizer type " + type);
}

}  // namespace kvgate::tokenizer
