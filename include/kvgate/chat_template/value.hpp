#pragma once
// Values a chat template computes with: Jinja's undefined and none, booleans,
// integers, floats, strings, lists, mappings (insertion-ordered, as Python
// dicts and JSON objects are), namespaces and callables. Strings, lists and
// mappings are shared, immutable once built (namespaces are the one mutable
// kind, as in Jinja), so copying a Value never copies a message's text.
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace kvgate::chat_template {

class Value;
struct RenderContext;
using List = std::vector<Value>;
using Mapping = std::vector<std::pair<std::string, Value>>;  // small; linear lookup keeps order

struct Undefined {
  bool operator==(const Undefined&) const = default;
};
struct None {
  bool operator==(const None&) const = default;
};
struct Namespace {
  Mapping entries;
};
struct Arguments;
// A built-in or macro. Errors go to the context (see RenderContext::fail).
using Function = std::function<Value(Arguments&, RenderContext&)>;

class Value {
 public:
  enum class Kind { kUndefined, kNone, kBool, kInteger, kFloat, kString, kList, kMapping, kNamespace, kFunction };

  Value() = default;
  Value(None) : data_(None{}) {}                      // NOLINT(google-explicit-constructor)
  Value(bool flag) : data_(flag) {}                   // NOLINT(google-explicit-constructor)
  Value(std::int64_t number) : data_(number) {}       // NOLINT(google-explicit-constructor)
  Value(int number) : data_(std::int64_t{number}) {}  // NOLINT(google-explicit-constructor)
  Value(double number) : data_(number) {}             // NOLINT(google-explicit-constructor)
  Value(std::string text) : data_(std::make_shared<const std::string>(std::move(text))) {}  // NOLINT
  Value(const char* text) : Value(std::string(text)) {}                       // NOLINT(google-explicit-constructor)
  Value(List list) : data_(std::make_shared<const List>(std::move(list))) {}  // NOLINT
  Value(Mapping mapping) : data_(std::make_shared<const Mapping>(std::move(mapping))) {}  // NOLINT
  Value(std::shared_ptr<Namespace> space) : data_(std::move(space)) {}  // NOLINT(google-explicit-constructor)
  Value(Function function) : data_(std::make_shared<const Function>(std::move(function))) {}  // NOLINT

  [[nodiscard]] Kind kind() const { return static_cast<Kind>(data_.index()); }
  [[nodiscard]] bool is(Kind kind) const { return this->kind() == kind; }
  [[nodiscard]] bool is_undefined() const { return is(Kind::kUndefined); }
  [[nodiscard]] bool is_none() const { return is(Kind::kNone); }
  [[nodiscard]] bool is_string() const { return is(Kind::kString); }
  [[nodiscard]] bool is_number() const { return is(Kind::kInteger) || is(Kind::kFloat); }

  [[nodiscard]] bool as_bool() const { return std::get<bool>(data_); }
  [[nodiscard]] std::int64_t as_integer() const { return std::get<std::int64_t>(data_); }
  [[nodiscard]] double as_float() const { return std::get<double>(data_); }
  [[nodiscard]] double as_number() const { return is(Kind::kInteger) ? static_cast<double>(as_integer()) : as_float(); }
  [[nodiscard]] const std::string& as_string() const { return *std::get<std::shared_ptr<const std::string>>(data_); }
  [[nodiscard]] const List& as_list() const { return *std::get<std::shared_ptr<const List>>(data_); }
  [[nodiscard]] const Mapping& as_mapping() const { return *std::get<std::shared_ptr<const Mapping>>(data_); }
  [[nodiscard]] Namespace& as_namespace() const { return *std::get<std::shared_ptr<Namespace>>(data_); }
  [[nodiscard]] const Function& as_function() const { return *std::get<std::shared_ptr<const Function>>(data_); }

  // Python truthiness: empty strings, lists and mappings are false.
  [[nodiscard]] bool truthy() const;
  // A mapping's or namespace's entry; nullptr when absent or not a mapping.
  [[nodiscard]] const Value* find(std::string_view key) const;
  [[nodiscard]] std::string_view type_name() const;

  // A string that stays where it is, in `owner` (a request body): the text
  // is not copied, and the value keeps the owner alive. Without an owner,
  // a copy.
  static Value text_in(const std::shared_ptr<const void>& owner, const std::string& text) {
    if (!owner) {
      return Value(text);
    }
    Value value;
    value.data_ = std::shared_ptr<const std::string>(owner, &text);
    return value;
  }
  // Keeps the order of object keys (ordered_json), which tojson output shows.
  // With an `owner` holding `json`, strings are shared from it (text_in).
  static Value from_json(const nlohmann::ordered_json& json, const std::shared_ptr<const void>& owner = nullptr);

 private:
  std::variant<Undefined, None, bool, std::int64_t, double, std::shared_ptr<const std::string>,
               std::shared_ptr<const List>, std::shared_ptr<const Mapping>, std::shared_ptr<Namespace>,
               std::shared_ptr<const Function>>
      data_;
};

// Positional arguments then keyword arguments, as a call received them.
struct Arguments {
  List positional;
  Mapping keywords;
  // The positional argument at `index`, else the keyword `name`, else nullptr.
  [[nodiscard]] const Value* get(std::size_t index, std::string_view name) const;
};

// How {{ value }} prints a value (the reference's toString): none and
// undefined print nothing, floats keep a ".0", lists and mappings print as
// JSON.
void append_output(std::string& out, const Value& value);
std::string to_output(const Value& value);

// The text a value holds: its strings, four levels deep (messages ->
// message -> content list -> part -> text). Counting stops once the total
// reaches `enough`, so asking whether a message holds a few hundred bytes
// does not read a long one whole.
std::size_t text_bytes(const Value& value, std::size_t enough = SIZE_MAX);

struct JsonOptions {
  int indent = -1;  // < 0: one line
  bool ensure_ascii = false;
  bool sort_keys = false;
  std::string item_separator;  // empty: ", " (or "," when indenting)
  std::string key_separator;   // empty: ": "
};
// The tojson filter: Python's json.dumps with the given options. Returns
// false (leaving `out` partial) for values JSON cannot hold (functions,
// a namespace inside itself: nesting beyond 256 levels).
bool append_json(std::string& out, const Value& value, const JsonOptions& options, int depth = 0);

// Jinja's == : numbers by value, strings by content, lists and mappings
// element-wise.
bool equal(const Value& left, const Value& right);

}  // namespace kvgate::chat_template
