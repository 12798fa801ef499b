#include "pre_tokenizer.hpp"

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "kvgate/core/utf8.hpp"
#include "kvgate/tokenizer/hf_tokenizer.hpp"
#include "normalizer.hpp"
#include "regex.hpp"

namespace kvgate::tokenizer {

namespace {

enum class Behavior { kRemoved, kIsolated, kMergedWithPrevious, kMergedWithNext, kContiguous };

struct Piece {
  std::size_t begin;
  std::size_t end;
  bool is_match;
};

Behavior parse_behavior(const std::string& name) {
  if (name == "Removed") {
    return Behavior::kRemoved;
  }
  if (name == "Isolated") {
    return Behavior::kIsolated;
  }
  if (name == "MergedWithPrevious") {
    return Behavior::kMergedWithPrevious;
  }
  if (name == "MergedWithNext") {
    return Behavior::kMergedWithNext;
  }
  if (name == "Contiguous") {
    return Behavior::kContiguous;
  }
  throw TokenizerLoadError("unsupported split behavior " + name);
}

// Walks the text's matches and the gaps between them, in order, skipping
// empty pieces. An empty match splits like the reference's regex_split does
// and the search moves on by one character.
template <class Visit>
void for_each_piece(const Regex& pattern, std::string_view text, MatchScratch& scratch, Visit&& visit) {
  std::size_t previous = 0;
  std::size_t search = 0;
  while (search <= text.size()) {
    MatchSpan match = pattern.find(text, search, scratch);
    if (match.end == std::string_view::npos) {
      break;
    }
    if (match.begin > previous) {
      visit(Piece{previous, match.begin, false});
    }
    if (match.end > match.begin) {
      visit(Piece{match.begin, match.end, true});
      search = match.end;
    } else {
      if (match.begin >= text.size()) {
        break;
      }
      search = match.begin + utf8_sequence_length(static_cast<unsigned char>(text[match.begin]));
    }
    previous = match.begin == match.end ? match.begin : match.end;
  }
  if (previous < text.size()) {
    visit(Piece{previous, text.size(), false});
  }
}

// Hugging Face tokenizers' SplitDelimiterBehavior, applied to the pieces.
std::vector<Piece> apply_behavior(std::vector<Piece> pieces, Behavior behavior) {
  std::vector<Piece> out;
  bool previous_match = false;
  switch (behavior) {
    case Behavior::kRemoved:
      for (const auto& piece : pieces) {
        if (!piece.is_match) {
          out.push_back(piece);
        }
      }
      return out;
    case Behavior::kIsolated:
      return pieces;
    case Behavior::kMergedWithPrevious:
      for (const auto& piece : pieces) {
        if (piece.is_match && !previous_match && !out.empty()) {
          out.back().end = piece.end;
        } else {
          out.push_back(piece);
        }
        previous_match = piece.is_match;
      }
      return out;
    case Behavior::kMergedWithNext:
      for (auto piece = pieces.rbegin(); piece != pieces.rend(); ++piece) {
        if (piece->is_match && !previous_match && !out.empty()) {
          out.back().begin = piece->begin;
        } else {
          out.push_back(*piece);
        }
        previous_match = piece->is_match;
      }
      return {out.rbegin(), out.rend()};
    case Behavior::kContiguous:
      for (const auto& piece : pieces) {
        if (!out.empty() && piece.is_match == previous_match) {
          out.back().end = piece.end;
        } else {
          out.push_back(piece);
        }
        previous_match = piece.is_match;
      }
      return out;
  }
  return pieces;
}

class Split final : public PreTokenizer {
 public:
  Split(Regex pattern, Behavior behavior, bool invert)
      : pattern_(std::move(pattern)), behavior_(behavior), invert_(invert) {}

  void split(std::string_view text, PreTokenizeContext& context, PieceSink sink) const override {
    if (behavior_ == Behavior::kIsolated) {  // the hot path: no buffering
      for_each_piece(pattern_, text, context.scratch,
                     [&](const Piece& piece) { sink(text.substr(piece.begin, piece.end - piece.begin)); });
      return;
    }
    std::vector<Piece> pieces;
    for_each_piece(pattern_, text, context.scratch, [&](Piece piece) {
      piece.is_match = piece.is_match != invert_;
      pieces.push_back(piece);
    });
    for (const auto& piece : apply_behavior(std::move(pieces), behavior_)) {
      sink(text.substr(piece.begin, piece.end - piece.begin));
    }
  }

 private:
  Regex pattern_;
  Behavior behavior_;
  bool invert_;
};

// GPT-2's pattern, which ByteLevel applies when use_regex is set.
constexpr std::string_view kGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

class ByteLevel final : public PreTokenizer {
 public:
  ByteLevel(bool add_prefix_space, bool use_regex)
      : add_prefix_space_(add_prefix_space),
        gpt2_(use_regex
                  ? std::make_unique<Split>(std::move(Regex::compile(kGpt2Pattern).value()), Behavior::kIsolated, false)
                  : nullptr) {}

  void split(std::string_view text, PreTokenizeContext& context, PieceSink sink) const override {
    std::string prefixed;
    if (add_prefix_space_ && !text.starts_with(' ')) {
      prefixed = " " + std::string(text);
      text = prefixed;
    }
    if (gpt2_) {
      gpt2_->split(text, context, sink);
    } else {
      sink(text);
    }
  }

 private:
  bool add_prefix_space_;
  std::unique_ptr<Split> gpt2_;
};

// Hugging Face tokenizers' Metaspace: spaces become the replacement
// character, a prefix is added per prepend_scheme, and with `split` the text
// is cut before each replacement character.
class Metaspace final : public PreTokenizer {
 public:
  Metaspace(std::string replacement, std::string prepend_scheme, bool split)
      : replacement_(std::move(replacement)),
        prepend_scheme_(std::move(prepend_scheme)),
        splitter_(split ? std::make_unique<Split>(Regex::literal(replacement_), Behavior::kMergedWithNext, false)
                        : nullptr) {}

  void split(std::string_view text, PreTokenizeContext& context, PieceSink sink) const override {
    std::string replaced;
    replaced.reserve(text.size() + replacement_.size());
    for (char symbol : text) {
      if (symbol == ' ') {
        replaced += replacement_;
      } else {
        replaced += symbol;
      }
    }
    bool prepend = prepend_scheme_ == "always" || (prepend_scheme_ == "first" && context.first_section);
    if (prepend && !replaced.starts_with(replacement_)) {
      replaced.insert(0, replacement_);
    }
    if (splitter_) {
      splitter_->split(replaced, context, sink);
    } else {
      sink(replaced);
    }
  }

 private:
  std::string replacement_;
  std::string prepend_scheme_;
  std::unique_ptr<Split> splitter_;
};

class Sequence final : public PreTokenizer {
 public:
  explicit Sequence(std::vector<std::unique_ptr<PreTokenizer>> steps) : steps_(std::move(steps)) {}

  void split(std::string_view text, PreTokenizeContext& context, PieceSink sink) const override {
    run(0, text, context, sink);
  }

 private:
  void run(std::size_t step, std::string_view text, PreTokenizeContext& context, PieceSink sink) const {
    if (step == steps_.size()) {
      sink(text);
      return;
    }
    steps_[step]->split(text, context, [&](std::string_view piece) { run(step + 1, piece, context, sink); });
  }

  std::vector<std::unique_ptr<PreTokenizer>> steps_;
};

std::unique_ptr<PreTokenizer> make_split(const nlohmann::json& spec) {
  return std::make_unique<Split>(pattern_from_spec(spec.at("pattern")), parse_behavior(spec.at("behavior")),
                                 spec.value("invert", false));
}

std::unique_ptr<PreTokenizer> make_metaspace(const nlohmann::json& spec) {
  std::string scheme = "always";
  if (spec.contains("prepend_scheme")) {
    scheme = spec["prepend_scheme"].get<std::string>();
  } else if (spec.contains("add_prefix_space")) {  // files written before prepend_scheme existed
    scheme = spec["add_prefix_space"].get<bool>() ? "always" : "never";
  }
  return std::make_unique<Metaspace>(spec.value("replacement", std::string("\u2581")), scheme,
                                     spec.value("split", true));
}

}  // namespace

std::unique_ptr<PreTokenizer> make_pre_tokenizer(const nlohmann::json& spec, bool& byte_level) {
  if (spec.is_null()) {
    return nullptr;
  }
  auto type = spec.at("type").get<std::string>();
  if (type == "Split") {
    return make_split(spec);
  }
  if (type == "ByteLevel") {
    byte_level = true;
    bool prefix = spec.value("add_prefix_space", false);
    bool regex = spec.value("use_regex", true);
    // Without either, the step only maps bytes to characters, which kvgate's
    // raw-byte vocabulary makes unnecessary.
    if (!prefix && !regex) {
      return nullptr;
    }
    return std::make_unique<ByteLevel>(prefix, regex);
  }
  if (type == "Digits") {
    bool individual = spec.value("individual_digits", false);
    return std::make_unique<Split>(std::move(Regex::compile(R"(\p{N})").value()),
                                   individual ? Behavior::kIsolated : Behavior::kContiguous, false);
  }
  if (type == "Metaspace") {
    return make_metaspace(spec);
  }
  if (type == "WhitespaceSplit") {
    return std::make_unique<Split>(std::move(Regex::compile(R"(\s+)").value()), Behavior::kRemoved, false);
  }
  if (type == "Whitespace") {
    return std::make_unique<Split>(std::move(Regex::compile(R"(\w+|[^\w\s]+)").value()), Behavior::kRemoved, true);
  }
  if (type == "Sequence") {
    std::vector<std::unique_ptr<PreTokenizer>> steps;
    for (const auto& step : spec.at("pretokenizers")) {
      if (auto made = make_pre_tokenizer(step, byte_level)) {
        steps.push_back(std::move(made));
      }
    }
    if (steps.size() == 1) {
      return std::move(steps.front());
    }
    if (steps.empty()) {
      return nullptr;
    }
    return std::make_unique<Sequence>(std::move(steps));
  }
  throw TokenizerLoadError("unsupported pre_tokenizer type " + type);
}

}  // namespace kvgate::tokenizer
