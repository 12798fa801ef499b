#include "decoder.hpp"

#include <nlohmann/json.hpp>

#include "bpe.hpp"
#include "kvgate/core/utf8.hpp"
#include "kvgate/tokenizer/hf_tokenizer.hpp"
#include "normalizer.hpp"
#include "regex.hpp"

namespace kvgate::tokenizer {

namespace {

class ByteLevel final : public Decoder {
 public:
  explicit ByteLevel(std::shared_ptr<const std::unordered_set<std::string>> added) : added_(std::move(added)) {}
  void decode_chain(std::vector<std::string>& tokens) const override {
    std::vector<std::string> out;
    std::string bytes;
    auto flush = [&] {
      if (!bytes.empty()) {
        out.push_back(decode_utf8_lossy(bytes));
      }
      bytes.clear();
    };
    for (const auto& token : tokens) {
      if (added_->contains(token)) {
        flush();
        out.push_back(token);
        continue;
      }
      std::size_t position = 0;
      while (position < token.size()) {
        int byte = unicode_to_byte(next_code_point(token, position));
        bytes.push_back(static_cast<char>(byte < 0 ? 0 : byte));  // the reference turns unmapped characters into 0
      }
    }
    flush();
    tokens = std::move(out);
  }

 private:
  std::shared_ptr<const std::unordered_set<std::string>> added_;
};

class Replace final : public Decoder {
 public:
  Replace(Regex pattern, std::string content) : pattern_(std::move(pattern)), content_(std::move(content)) {}
  void decode_chain(std::vector<std::string>& tokens) const override {
    MatchScratch scratch;
    for (auto& token : tokens) {
      std::string out;
      std::size_t position = 0;
      while (position <= token.size()) {
        MatchSpan match = pattern_.find(token, position, scratch);
        if (match.end == std::string::npos || match.end == match.begin) {
          break;
        }
        out.append(token, position, match.begin - position);
        out += content_;
        position = match.end;
      }
      out.append(token, std::min(position, token.size()));
      token = std::move(out);
    }
  }

 private:
  Regex pattern_;
  std::string content_;
};

class ByteFallback final : public Decoder {
 public:
  void decode_chain(std::vector<std::string>& tokens) const override {
    std::vector<std::string> out;
    std::string bytes;
    for (auto& token : tokens) {
      if (token.size() == 6 && token.starts_with("<0x") && token.ends_with(">") && std::isxdigit(token[3]) &&
          std::isxdigit(token[4])) {
        bytes.push_back(static_cast<char>(std::stoi(token.substr(3, 2), nullptr, 16)));
        continue;
      }
      if (!bytes.empty()) {
        out.push_back(decode_utf8_lossy(bytes));
      }
      bytes.clear();
      out.push_back(std::move(token));
    }
    if (!bytes.empty()) {
      out.push_back(decode_utf8_lossy(bytes));
    }
    tokens = std::move(out);
  }
};

class Fuse final : public Decoder {
 public:
  void decode_chain(std::vector<std::string>& tokens) const override {
    std::string joined;
    for (const auto& token : tokens) {
      joined += token;
    }
    tokens.clear();
    tokens.push_back(std::move(joined));
  }
};

// Removes up to `start` leading and `stop` trailing copies of `content`
// (one character) from every token.
class Strip final : public Decoder {
 public:
  Strip(std::string content, int start, int stop) : content_(std::move(content)), start_(start), stop_(stop) {}
  void decode_chain(std::vector<std::string>& tokens) const override {
    if (content_.empty()) {
      return;
    }
    for (auto& token : tokens) {
      std::string_view view = token;
      for (int count = 0; count < start_ && view.starts_with(content_); ++count) {
        view.remove_prefix(content_.size());
      }
      for (int count = 0; count < stop_ && view.ends_with(content_); ++count) {
        view.remove_suffix(content_.size());
      }
      token = std::string(view);
    }
  }

 private:
  std::string content_;
  int start_;
  int stop_;
};

class Metaspace final : public Decoder {
 public:
  explicit Metaspace(std::string replacement) : replacement_(std::move(replacement)) {}
  void decode_chain(std::vector<std::string>& tokens) const override {
    for (std::size_t index = 0; index < tokens.size(); ++index) {
      std::string out;
      std::string_view token = tokens[index];
      for (std::size_t found; (found = token.find(replacement_)) != std::string_view::npos;) {
        out.append(token.substr(0, found));
        out += ' ';
        token.remove_prefix(found + replacement_.size());
      }
      out.append(token);
      if (index == 0 && out.starts_with(' ')) {
        out.erase(0, 1);
      }
      tokens[index] = std::move(out);
    }
  }

 private:
  std::string replacement_;
};

class BpeSuffix final : public Decoder {
 public:
  explicit BpeSuffix(std::string suffix) : suffix_(std::move(suffix)) {}
  void decode_chain(std::vector<std::string>& tokens) const override {
    if (suffix_.empty()) {
      return;
    }
    for (std::size_t index = 0; index < tokens.size(); ++index) {
      std::string replacement = index + 1 == tokens.size() ? "" : " ";
      std::string& token = tokens[index];
      for (std::size_t found = 0; (found = token.find(suffix_, found)) != std::string::npos;) {
        token.replace(found, suffix_.size(), replacement);
        found += replacement.size();
      }
    }
  }

 private:
  std::string suffix_;
};

class Sequence final : public Decoder {
 public:
  explicit Sequence(std::vector<std::unique_ptr<Decoder>> steps) : steps_(std::move(steps)) {}
  void decode_chain(std::vector<std::string>& tokens) const override {
    for (const auto& step : steps_) {
      step->decode_chain(tokens);
    }
  }

 private:
  std::vector<std::unique_ptr<Decoder>> steps_;
};

}  // namespace

std::unique_ptr<Decoder> make_decoder(const nlohmann::json& spec,
                                      std::shared_ptr<const std::unordered_set<std::string>> added_tokens) {
  if (spec.is_null()) {
    return nullptr;
  }
  auto type = spec.at("type").get<std::string>();
  if (type == "ByteLevel") {
    return std::make_unique<ByteLevel>(std::move(added_tokens));
  }
  if (type == "Replace") {
    return std::make_unique<Replace>(pattern_from_spec(spec.at("pattern")), spec.value("content", std::string()));
  }
  if (type == "ByteFallback") {
    return std::make_unique<ByteFallback>();
  }
  if (type == "Fuse") {
    return std::make_unique<Fuse>();
  }
  if (type == "Strip") {
    return std::make_unique<Strip>(spec.value("content", std::string()), spec.value("start", 0), spec.value("stop", 0));
  }
  if (type == "Metaspace") {
    return std::make_unique<Metaspace>(spec.value("replacement", std::string("\u2581")));
  }
  if (type == "BPEDecoder") {
    return std::make_unique<BpeSuffix>(spec.value("suffix", std::string("</w>")));
  }
  if (type == "Sequence") {
    std::vector<std::unique_ptr<Decoder>> steps;
    for (const auto& step : spec.at("decoders")) {
      if (auto made = make_decoder(step, added_tokens)) {
        steps.push_back(std::move(made));
      }
    }
    return std::make_unique<Sequence>(std::move(steps));
  }
  throw TokenizerLoadError("unsupported decoder type " + type);
}

}  // namespace kvgate::tokenizer
