#pragma once
// Incremental rendering: a loop iteration's output and effects, remembered
// with everything the iteration read from outside itself, so that the next
// render of the same template replays it when those reads would give the
// same values. A chat's next turn resends every earlier message; their
// iterations are replayed instead of evaluated again.
//
// Soundness rests on the dependencies being complete. An iteration's result
// is a function of the values it reads from scopes at or above its loop's
// scope (variables, namespace attributes, `loop.*`), of the outcome of the
// `if` tests that read only such values, and of nothing else: the clock
// (strftime_now) and macro calls (whose bodies run in an interpreter of their
// own) make an iteration unrecordable. Values are compared for identity of
// rendering (`matches_encoded`: 1 and 1.0 differ, namespaces never match).
#include <cstdint>
#include <list>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "ast.hpp"
#include "kvgate/chat_template/value.hpp"

namespace kvgate::chat_template {

// A cheap hash of a value that tells messages apart without reading all of
// their text (lengths, the ends of strings, the first entries of lists).
std::uint64_t fingerprint(const Value& value);

// What a dependency's value was, kept apart from the request it came from:
// a compact encoding in which a long string that the iteration wrote out
// verbatim (a message's text, mostly) is a slice of the iteration's output.
// Validating then reads the new text and that slice once, and the replay
// copies the slice just read, instead of comparing against a copy of the
// text elsewhere in memory.
std::string encode_value(const Value& value, std::string_view output);
// Whether `value` has the same kind and, recursively, the same content as the
// value `encoded` was made from: what rendering can tell apart. Namespaces are
// mutable and per render, so they never match; builtin functions are shared
// by every render and compared by address.
bool matches_encoded(const Value& value, std::string_view encoded, std::string_view output);

// What an iteration read from outside itself. Names point into the template's
// syntax tree, which the entry keeps alive.
struct Dependency {
  enum class Kind : std::uint8_t {
    kVariable,  // `name` resolved at or above the loop's scope to `value` (undefined: not found)
    // `name` resolved there to a mapping whose key `attribute` held `value`
    // (undefined: no such key, and not a method name): `message.role` read
    // alone does not make the message's text a dependency.
    kMember,
    kAttribute,  // namespace variable `name`'s attribute `attribute` was `value` (absent: undefined)
    kTest,       // the `if` test `test`, reading only such values, was `value` (bool)
    // `name` resolved at or above the loop's scope to a namespace, which was
    // the same object as the one of the `alias`-th such dependency (itself
    // when first): attribute reads and writes go through these names.
    kNamespace,
  };
  Kind kind = Kind::kVariable;
  std::string_view name;
  std::string_view attribute;
  const Node* test = nullptr;
  std::uint32_t alias = 0;
  Value value;          // while recording; kTest's outcome
  std::string encoded;  // once stored, kVariable's and kAttribute's value (encode_value)
};

// What an iteration changed outside itself: variables of the loop's scope and
// attributes of namespaces reached by name; final values.
struct Effect {
  std::string_view name;
  std::string_view attribute;  // empty: the variable itself
  Value value;
};

enum class IterationFlow : std::uint8_t { kNormal, kContinue };

struct IterationRecord {
  std::vector<Dependency> dependencies;
  std::vector<Effect> effects;
  std::string output;
  std::uint64_t steps = 0;  // evaluation steps the iteration took (the step limit counts them on replay)
  IterationFlow flow = IterationFlow::kNormal;
};

// Recent iterations keyed by (template, loop, fingerprint of the item), least
// recently used evicted past a byte budget. One per thread: not synchronised.
class IterationMemo {
 public:
  IterationMemo(std::size_t capacity_bytes, std::size_t min_output_bytes, std::uint64_t min_steps)
      : capacity_bytes_(capacity_bytes), min_output_bytes_(min_output_bytes), min_steps_(min_steps) {}

  // Whether an iteration of this size is worth keeping (RenderCache).
  [[nodiscard]] bool worth_keeping(std::size_t output_bytes, std::uint64_t steps) const {
    return output_bytes >= min_output_bytes_ || steps >= min_steps_;
  }
  [[nodiscard]] std::size_t min_output_bytes() const { return min_output_bytes_; }

  // Loops whose iterations over items with little text turned out worth
  // keeping (by their steps or their output). Other loops do not record such
  // iterations: recording costs more than evaluating, and they would not be
  // kept. A loop is noted the first time such an iteration, evaluated
  // plainly, would have been kept; only speed depends on this, never output.
  [[nodiscard]] bool records_small_items(const void* program, const Node* loop) const;
  void note_small_items_pay(const void* program, const Node* loop);

  struct Key {
    const void* program = nullptr;
    const Node* loop = nullptr;
    std::uint64_t item = 0;
    bool operator==(const Key&) const = default;
  };

  // The record stored under `key`, or nullptr; marks it recently used.
  const IterationRecord* find(const Key& key);
  // Replaces what `key` held; `program` keeps the syntax tree the record
  // points into alive.
  void store(const Key& key, std::shared_ptr<const void> program, IterationRecord record);

  [[nodiscard]] std::size_t bytes() const { return bytes_; }
  std::uint64_t replayed = 0;   // iterations replayed from the memo
  std::uint64_t evaluated = 0;  // iterations evaluated (missed, or did not validate)

 private:
  struct KeyHash {
    std::size_t operator()(const Key& key) const;
  };
  struct Entry {
    Key key;
    std::shared_ptr<const void> program;
    IterationRecord record;
    std::size_t bytes = 0;
  };
  void evict_to(std::size_t budget);

  std::size_t capacity_bytes_;
  std::size_t min_output_bytes_;
  std::uint64_t min_steps_;
  std::size_t bytes_ = 0;
  // A template has a few loops; reloads add more (cleared past a bound).
  std::vector<std::pair<const void*, const Node*>> small_item_loops_;
  std::list<Entry> order_;  // most recently used first
  std::unordered_map<Key, std::list<Entry>::iterator, KeyHash> map_;
};

}  // namespace kvgate::chat_template
