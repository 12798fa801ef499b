#pragma once
// tokenizer.json "pre_tokenizer": cuts a normalized section into words the
// model encodes one by one. Pieces stream to a sink instead of filling
// vectors, so the common pipeline (one regex Split, then ByteLevel) costs no
// allocation per word. Supported types: Split (string or regex; behaviours
// Isolated, Removed, MergedWithPrevious, MergedWithNext, Contiguous; invert),
// ByteLevel, Digits, Metaspace, WhitespaceSplit, Whitespace, Sequence.
//
// Pieces are in the model's byte alphabet: kvgate keeps byte-level vocabularies
// in raw bytes (see bpe.hpp), so ByteLevel's byte-to-character mapping is not
// applied here; only its prefix space and optional GPT-2 regex are.
#include <memory>
#include <string_view>
#include <type_traits>
#include <utility>

#include <nlohmann/json_fwd.hpp>

namespace kvgate::tokenizer {

class MatchScratch;

// A non-owning reference to a callable, valid for the duration of one call.
template <class Signature>
class FunctionRef;
template <class Result, class... Arguments>
class FunctionRef<Result(Arguments...)> {
 public:
  template <class Callable, class = std::enable_if_t<!std::is_same_v<std::decay_t<Callable>, FunctionRef>>>
  FunctionRef(Callable&& callable)  // NOLINT(google-explicit-constructor)
      : object_(const_cast<void*>(static_cast<const void*>(&callable))),
        call_([](void* object, Arguments... arguments) -> Result {
          return (*static_cast<std::remove_reference_t<Callable>*>(object))(std::forward<Arguments>(arguments)...);
        }) {}
  Result operator()(Arguments... arguments) const { return call_(object_, std::forward<Arguments>(arguments)...); }

 private:
  void* object_;
  Result (*call_)(void*, Arguments...);
};

using PieceSink = FunctionRef<void(std::string_view)>;

struct PreTokenizeContext {
  MatchScratch& scratch;
  bool first_section = true;  // Metaspace's prepend_scheme "first"
};

class PreTokenizer {
 public:
  virtual ~PreTokenizer() = default;
  virtual void split(std::string_view text, PreTokenizeContext& context, PieceSink sink) const = 0;
};

// nullptr for a null spec (the whole section is one word); throws
// TokenizerLoadError for unknown types. Sets `byte_level` when the pipeline
// contains a ByteLevel step, i.e. the vocabulary is in GPT-2's byte alphabet.
std::unique_ptr<PreTokenizer> make_pre_tokenizer(const nlohmann::json& spec, bool& byte_level);

}  // namespace kvgate::tokenizer
