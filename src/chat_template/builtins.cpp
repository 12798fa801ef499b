// Filters, tests, methods and globals chat templates use, with the
// reference's semantics (@huggingface/jinja); where it departs from Python
// Jinja in a way that changes real prompts (str.strip(chars)), Python's
// behaviour is kept, since that is what the engines run.
#include <algorithm>
#include <cmath>
#include <ctime>

#include "interpreter.hpp"
#include "kvgate/core/utf8.hpp"

namespace kvgate::chat_template {

namespace {

using Kind = Value::Kind;

// JavaScript's trim set, which the reference strips with.
std::string strip(const std::string& text, bool left, bool right, const Value* characters) {
  if (characters == nullptr || characters->is_none() || characters->is_undefined() || !characters->is_string()) {
    std::string_view view = text;
    if (left) {
      view = kvgate::trim_start_javascript(view);
    }
    if (right) {
      view = kvgate::trim_end_javascript(view);
    }
    return std::string(view);
  }
  // Python's str.strip(chars): remove any of the given characters.
  const std::string& set = characters->as_string();
  std::size_t begin = 0;
  std::size_t end = text.size();
  if (left) {
    begin = text.find_first_not_of(set);
  }
  if (begin == std::string::npos) {
    return {};
  }
  if (right) {
    end = text.find_last_not_of(set) + 1;
  }
  return text.substr(begin, end - begin);
}

std::string ascii_case(std::string text, bool upper) {
  for (char& symbol : text) {
    symbol = static_cast<char>(upper ? std::toupper(static_cast<unsigned char>(symbol))
                                     : std::tolower(static_cast<unsigned char>(symbol)));
  }
  return text;
}

std::string replace_all(const std::string& text, const std::string& old_text, const std::string& new_text,
                        std::int64_t count) {
  if (count == 0) {
    return text;
  }
  std::string out;
  std::int64_t remaining = count < 0 ? INT64_MAX : count;
  if (old_text.empty()) {  // Python inserts between every character
    std::size_t position = 0;
    while (position <= text.size()) {
      if (remaining-- > 0) {
        out += new_text;
      }
      if (position == text.size()) {
        break;
      }
      std::size_t start = position;
      kvgate::next_code_point(text, position);
      out.append(text, start, position - start);
    }
    return out;
  }
  std::size_t position = 0;
  for (std::size_t found; remaining > 0 && (found = text.find(old_text, position)) != std::string::npos; --remaining) {
    out.append(text, position, found - position);
    out += new_text;
    position = found + old_text.size();
  }
  out.append(text, position);
  return out;
}

Value split(const std::string& text, const Value* separator, std::int64_t max_split) {
  List parts;
  if (separator == nullptr || separator->is_none()) {
    std::size_t position = 0;
    auto is_space = [](char symbol) { return symbol == ' ' || (symbol >= '\t' && symbol <= '\r'); };
    while (position < text.size()) {
      while (position < text.size() && is_space(text[position])) {
        ++position;
      }
      if (position >= text.size()) {
        break;
      }
      if (max_split >= 0 && static_cast<std::int64_t>(parts.size()) >= max_split) {
        parts.emplace_back(text.substr(position));
        break;
      }
      std::size_t end = position;
      while (end < text.size() && !is_space(text[end])) {
        ++end;
      }
      parts.emplace_back(text.substr(position, end - position));
      position = end;
    }
    return Value(std::move(parts));
  }
  const std::string& delimiter = separator->as_string();
  std::size_t position = 0;
  for (std::size_t found; (max_split < 0 || static_cast<std::int64_t>(parts.size()) < max_split) &&
                          (found = text.find(delimiter, position)) != std::string::npos;) {
    parts.emplace_back(text.substr(position, found - position));
    position = found + delimiter.size();
  }
  parts.emplace_back(text.substr(position));
  return Value(std::move(parts));
}

bool starts_or_ends(const std::string& text, const Value& pattern, bool starts) {
  auto check = [&](const std::string& piece) { return starts ? text.starts_with(piece) : text.ends_with(piece); };
  if (pattern.is_string()) {
    return check(pattern.as_string());
  }
  if (pattern.is(Kind::kList)) {
    return std::any_of(pattern.as_list().begin(), pattern.as_list().end(),
                       [&](const Value& item) { return item.is_string() && check(item.as_string()); });
  }
  return false;
}

Value title_case(const std::string& text) {
  std::string out = text;
  bool previous_word = false;
  for (char& symbol : out) {
    bool word = std::isalnum(static_cast<unsigned char>(symbol)) || symbol == '_';
    if (word && !previous_word) {
      symbol = static_cast<char>(std::toupper(static_cast<unsigned char>(symbol)));
    }
    previous_word = word;
  }
  return Value(std::move(out));
}

Value string_method(const Value& object, std::string_view name, Arguments& arguments, RenderContext& context) {
  const std::string& text = object.as_string();
  if (name == "upper") {
    return Value(ascii_case(text, true));
  }
  if (name == "lower") {
    return Value(ascii_case(text, false));
  }
  if (name == "strip") {
    return Value(strip(text, true, true, arguments.get(0, "chars")));
  }
  if (name == "lstrip") {
    return Value(strip(text, true, false, arguments.get(0, "chars")));
  }
  if (name == "rstrip") {
    return Value(strip(text, false, true, arguments.get(0, "chars")));
  }
  if (name == "title") {
    return title_case(text);
  }
  if (name == "capitalize") {
    std::string out = text;
    if (!out.empty()) {
      out[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(out[0])));
    }
    return Value(std::move(out));
  }
  if (name == "startswith" || name == "endswith") {
    const Value* pattern = arguments.get(0, "prefix");
    if (pattern == nullptr) {
      return context.fail(std::string(name) + "() requires at least one argument");
    }
    return Value(starts_or_ends(text, *pattern, name == "startswith"));
  }
  if (name == "split") {
    const Value* separator = arguments.get(0, "sep");
    const Value* limit = arguments.get(1, "maxsplit");
    if (separator && !separator->is_string() && !separator->is_none()) {
      return context.fail("sep argument must be a string or null");
    }
    if (separator && separator->is_string() && separator->as_string().empty()) {
      return context.fail("empty separator");
    }
    return split(text, separator, limit && limit->is(Kind::kInteger) ? limit->as_integer() : -1);
  }
  if (name == "replace") {
    const Value* old_text = arguments.get(0, "old");
    const Value* new_text = arguments.get(1, "new");
    const Value* count = arguments.get(2, "count");
    if (!old_text || !new_text || !old_text->is_string() || !new_text->is_string()) {
      return context.fail("replace() arguments must be strings");
    }
    return Value(replace_all(text, old_text->as_string(), new_text->as_string(),
                             count && count->is(Kind::kInteger) ? count->as_integer() : -1));
  }
  return context.fail("unknown string method " + std::string(name));
}

Value mapping_method(const Value& object, std::string_view name, Arguments& arguments, RenderContext& context) {
  const Mapping& entries = object.as_mapping();
  if (name == "get") {
    const Value* key = arguments.get(0, "key");
    if (!key || !key->is_string()) {
      return context.fail("object key must be a string");
    }
    if (const Value* found = object.find(key->as_string())) {
      return *found;
    }
    const Value* fallback = arguments.get(1, "default");
    return fallback ? *fallback : Value(None{});
  }
  List result;
  for (const auto& [key, value] : entries) {
    if (name == "items") {
      result.emplace_back(List{Value(key), value});
    }
    if (name == "keys") {
      result.emplace_back(key);
    }
    if (name == "values") {
      result.push_back(value);
    }
  }
  if (name == "items" || name == "keys" || name == "values") {
    return Value(std::move(result));
  }
  return context.fail("unknown mapping method " + std::string(name));
}

int compare_values(const Value& left, const Value& right, bool case_sensitive, RenderContext& context) {
  auto numeric = [](const Value& value) { return value.is_number() || value.is(Kind::kBool); };
  auto number_of = [](const Value& value) {
    return value.is(Kind::kBool) ? (value.as_bool() ? 1.0 : 0.0) : value.as_number();
  };
  if (numeric(left) && numeric(right)) {
    double a = number_of(left);
    double b = number_of(right);
    return a < b ? -1 : (a > b ? 1 : 0);
  }
  if (left.is_string() && right.is_string()) {
    std::string a = case_sensitive ? left.as_string() : ascii_case(left.as_string(), false);
    std::string b = case_sensitive ? right.as_string() : ascii_case(right.as_string(), false);
    return a < b ? -1 : (a > b ? 1 : 0);
  }
  if ((left.is_none() && right.is_none()) || (left.is_undefined() && right.is_undefined())) {
    return 0;
  }
  context.fail("cannot compare " + std::string(left.type_name()) + " with " + std::string(right.type_name()));
  return 0;
}

const Value* attribute_path(const Value& item, const std::string& path, Value& holder) {
  const Value* current = &item;
  std::size_t start = 0;
  while (current != nullptr) {
    std::size_t dot = path.find('.', start);
    std::string part = path.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    if (current->is(Kind::kList)) {
      char* end = nullptr;
      long index = std::strtol(part.c_str(), &end, 10);
      if (end == part.c_str() || index < 0 || static_cast<std::size_t>(index) >= current->as_list().size()) {
        return nullptr;
      }
      holder = current->as_list()[static_cast<std::size_t>(index)];
      current = &holder;
    } else {
      current = current->find(part);
    }
    if (dot == std::string::npos) {
      break;
    }
    start = dot + 1;
  }
  return current;
}

Value list_filter(std::string_view name, const Value& operand, Arguments& arguments, RenderContext& context) {
  const List& items = operand.as_list();
  if (name == "list") {
    return operand;
  }
  if (name == "first") {
    return items.empty() ? Value() : items.front();
  }
  if (name == "last") {
    return items.empty() ? Value() : items.back();
  }
  if (name == "length" || name == "count") {
    return Value(static_cast<std::int64_t>(items.size()));
  }
  if (name == "reverse") {
    return Value(List(items.rbegin(), items.rend()));
  }
  if (name == "join") {
    const Value* separator = arguments.get(0, "d");
    std::string out;
    for (std::size_t index = 0; index < items.size(); ++index) {
      if (index > 0 && separator && separator->is_string()) {
        out += separator->as_string();
      }
      append_output(out, items[index]);
    }
    return Value(std::move(out));
  }
  if (name == "string") {
    std::string out;
    append_json(out, operand, JsonOptions{});
    return Value(std::move(out));
  }
  if (name == "unique") {
    List kept;
    for (const Value& item : items) {
      if (std::none_of(kept.begin(), kept.end(), [&](const Value& seen) { return equal(seen, item); })) {
        kept.push_back(item);
      }
    }
    return Value(std::move(kept));
  }
  if (name == "sort") {
    const Value* reverse = arguments.get(0, "reverse");
    const Value* case_sensitive = arguments.get(1, "case_sensitive");
    const Value* attribute = arguments.get(2, "attribute");
    List sorted = items;
    std::stable_sort(sorted.begin(), sorted.end(), [&](const Value& a, const Value& b) {
      Value holder_a;
      Value holder_b;
      const Value* key_a = &a;
      const Value* key_b = &b;
      if (attribute && attribute->is_string()) {
        key_a = attribute_path(a, attribute->as_string(), holder_a);
        key_b = attribute_path(b, attribute->as_string(), holder_b);
        if (!key_a || !key_b) {
          return false;
        }
      }
      int order = compare_values(*key_a, *key_b, case_sensitive && case_sensitive->truthy(), context);
      return reverse && reverse->truthy() ? order > 0 : order < 0;
    });
    return Value(std::move(sorted));
  }
  if (name == "selectattr" || name == "rejectattr") {
    const Value* attribute = arguments.get(0, "attribute");
    const Value* test = arguments.get(1, "test");
    const Value* expected = arguments.get(2, "value");
    if (!attribute || !attribute->is_string()) {
      return context.fail("arguments of `" + std::string(name) + "` must be strings");
    }
    List kept;
    for (const Value& item : items) {
      if (!item.is(Kind::kMapping) && !item.is(Kind::kNamespace)) {
        return context.fail("`" + std::string(name) + "` can only be applied to array of objects");
      }
      const Value* field = item.find(attribute->as_string());
      bool result = false;
      if (field != nullptr && !field->is_undefined()) {
        if (test == nullptr) {
          result = field->truthy();
        } else if (test->as_string() == "equalto" || test->as_string() == "eq" || test->as_string() == "==") {
          result = expected != nullptr && equal(*field, *expected);
        } else {
          Value outcome = run_test(test->as_string(), *field, context);
          result = outcome.is(Kind::kBool) && outcome.as_bool();
        }
      }
      if (result == (name == "selectattr")) {
        kept.push_back(item);
      }
    }
    return Value(std::move(kept));
  }
  if (name == "map") {
    const Value* attribute = arguments.get(99, "attribute");
    if (!attribute || !attribute->is_string()) {
      return context.fail("`map` without `attribute` is not supported");
    }
    const Value* fallback = arguments.get(99, "default");
    List mapped;
    for (const Value& item : items) {
      Value holder;
      const Value* found = attribute_path(item, attribute->as_string(), holder);
      mapped.push_back(found && !found->is_undefined() ? *found : (fallback ? *fallback : Value()));
    }
    return Value(std::move(mapped));
  }
  return context.fail("unknown list filter: " + std::string(name));
}

Value string_filter(std::string_view name, const Value& operand, Arguments& arguments, RenderContext& context) {
  const std::string& text = operand.as_string();
  if (name == "length" || name == "count") {
    std::int64_t count = 0;
    for (char symbol : text) {
      count += (static_cast<unsigned char>(symbol) & 0xC0) != 0x80;
    }
    return Value(count);
  }
  if (name == "upper" || name == "lower" || name == "title" || name == "capitalize") {
    return string_method(operand, name, arguments, context);
  }
  if (name == "trim") {
    return Value(strip(text, true, true, arguments.get(0, "chars")));
  }
  if (name == "string" || name == "safe") {
    return operand;
  }
  if (name == "join") {
    const Value* separator = arguments.get(0, "d");
    std::string out;
    std::size_t position = 0;
    while (position < text.size()) {
      std::size_t start = position;
      kvgate::next_code_point(text, position);
      if (start > 0 && separator && separator->is_string()) {
        out += separator->as_string();
      }
      out.append(text, start, position - start);
    }
    return Value(std::move(out));
  }
  if (name == "int") {
    char* end = nullptr;
    long long number = std::strtoll(text.c_str(), &end, 10);
    if (end == text.c_str()) {
      const Value* fallback = arguments.get(0, "default");
      return fallback ? *fallback : Value(0);
    }
    return Value(static_cast<std::int64_t>(number));
  }
  if (name == "float") {
    char* end = nullptr;
    double number = std::strtod(text.c_str(), &end);
    if (end == text.c_str()) {
      const Value* fallback = arguments.get(0, "default");
      return fallback ? *fallback : Value(0.0);
    }
    return Value(number);
  }
  if (name == "indent") {
    const Value* width = arguments.get(0, "width");
    const Value* first = arguments.get(1, "first");
    const Value* blank = arguments.get(2, "blank");
    std::string pad =
        width && width->is_string()
            ? width->as_string()
            : std::string(width && width->is(Kind::kInteger) ? static_cast<std::size_t>(width->as_integer()) : 4, ' ');
    std::string out;
    std::size_t start = 0;
    for (std::size_t line = 0;; ++line) {
      std::size_t end = text.find('\n', start);
      std::string_view piece =
          std::string_view(text).substr(start, end == std::string::npos ? std::string::npos : end - start);
      bool skip = (line == 0 && !(first && first->truthy())) || (piece.empty() && !(blank && blank->truthy()));
      if (!skip) {
        out += pad;
      }
      out += piece;
      if (end == std::string::npos) {
        break;
      }
      out += '\n';
      start = end + 1;
    }
    return Value(std::move(out));
  }
  if (name == "replace") {
    return string_method(operand, name, arguments, context);
  }
  return context.fail("unknown string filter: " + std::string(name));
}

Value tojson(const Value& operand, Arguments& arguments, RenderContext& context) {
  JsonOptions options;
  if (const Value* indent = arguments.get(99, "indent"); indent && indent->is(Kind::kInteger)) {
    options.indent = static_cast<int>(indent->as_integer());
  }
  if (const Value* ascii = arguments.get(99, "ensure_ascii"); ascii && ascii->is(Kind::kBool)) {
    options.ensure_ascii = ascii->as_bool();
  }
  if (const Value* sort = arguments.get(99, "sort_keys"); sort && sort->is(Kind::kBool)) {
    options.sort_keys = sort->as_bool();
  }
  if (const Value* separators = arguments.get(99, "separators"); separators && separators->is(Kind::kList)) {
    const List& pair = separators->as_list();
    if (pair.size() != 2 || !pair[0].is_string() || !pair[1].is_string()) {
      return context.fail("separators must be a tuple of two strings");
    }
    options.item_separator = pair[0].as_string();
    options.key_separator = pair[1].as_string();
  }
  std::string out;
  if (!append_json(out, operand, options)) {
    return context.fail("cannot convert to JSON: " + std::string(operand.type_name()));
  }
  return Value(std::move(out));
}

}  // namespace

bool call_method(const Value& object, std::string_view name, Arguments& arguments, RenderContext& context,
                 Value& result) {
  static const std::vector<std::string> kStringMethods = {"upper",    "lower", "strip",      "lstrip",
                                                          "rstrip",   "title", "capitalize", "startswith",
                                                          "endswith", "split", "replace"};
  if (object.is_string() && std::find(kStringMethods.begin(), kStringMethods.end(), name) != kStringMethods.end()) {
    result = string_method(object, name, arguments, context);
    return true;
  }
  if (object.is(Kind::kMapping) && object.find(name) == nullptr &&
      (name == "get" || name == "items" || name == "keys" || name == "values")) {
    result = mapping_method(object, name, arguments, context);
    return true;
  }
  return false;
}

Value member_of(const Value& object, std::string_view name) {
  if (object.is_string()) {
    if (name == "length") {
      std::int64_t count = 0;
      for (char symbol : object.as_string()) {
        count += (static_cast<unsigned char>(symbol) & 0xC0) != 0x80;
      }
      return Value(count);
    }
    static const std::vector<std::string> kMethods = {"upper",    "lower", "strip",      "lstrip",
                                                      "rstrip",   "title", "capitalize", "startswith",
                                                      "endswith", "split", "replace"};
    if (std::find(kMethods.begin(), kMethods.end(), name) == kMethods.end()) {
      return {};
    }
    return Value(Function([object, name = std::string(name)](Arguments& arguments, RenderContext& context) {
      return string_method(object, name, arguments, context);
    }));
  }
  if (object.is(Kind::kList)) {
    if (name == "length") {
      return Value(static_cast<std::int64_t>(object.as_list().size()));
    }
    return {};
  }
  if (object.is(Kind::kMapping)) {
    if (name != "get" && name != "items" && name != "keys" && name != "values") {
      return {};
    }
    return Value(Function([object, name = std::string(name)](Arguments& arguments, RenderContext& context) {
      return mapping_method(object, name, arguments, context);
    }));
  }
  return {};
}

Value apply_filter(std::string_view name, const Value& operand, Arguments& arguments, RenderContext& context) {
  if (name == "safe") {
    return operand;
  }
  if (name == "tojson") {
    return tojson(operand, arguments, context);
  }
  if (name == "default" || name == "d") {
    const Value* fallback = arguments.get(0, "default_value");
    const Value* boolean = arguments.get(1, "boolean");
    if (operand.is_undefined() || (boolean && boolean->truthy() && !operand.truthy())) {
      return fallback ? *fallback : Value("");
    }
    return operand;
  }
  switch (operand.kind()) {
    case Kind::kList:
      return list_filter(name, operand, arguments, context);
    case Kind::kString:
      return string_filter(name, operand, arguments, context);
    case Kind::kInteger:
    case Kind::kFloat:
      if (name == "abs") {
        return operand.is(Kind::kInteger) ? Value(std::abs(operand.as_integer()))
                                          : Value(std::fabs(operand.as_float()));
      }
      if (name == "int") {
        return operand.is(Kind::kInteger) ? operand : Value(static_cast<std::int64_t>(std::floor(operand.as_float())));
      }
      if (name == "float") {
        return Value(operand.as_number());
      }
      if (name == "string") {
        return Value(to_output(operand));
      }
      break;
    case Kind::kMapping:
      if (name == "length" || name == "count") {
        return Value(static_cast<std::int64_t>(operand.as_mapping().size()));
      }
      if (name == "items" || name == "keys" || name == "values") {
        return mapping_method(operand, name, arguments, context);
      }
      if (name == "dictsort") {
        List pairs = mapping_method(operand, "items", arguments, context).as_list();
        std::stable_sort(pairs.begin(), pairs.end(), [&](const Value& a, const Value& b) {
          return compare_values(a.as_list()[0], b.as_list()[0], false, context) < 0;
        });
        return Value(std::move(pairs));
      }
      if (name == "string") {
        return Value(to_output(operand));
      }
      break;
    case Kind::kBool:
      if (name == "bool") {
        return operand;
      }
      if (name == "int") {
        return Value(operand.as_bool() ? 1 : 0);
      }
      if (name == "float") {
        return Value(operand.as_bool() ? 1.0 : 0.0);
      }
      if (name == "string") {
        return Value(operand.as_bool() ? "true" : "false");
      }
      break;
    default:
      break;
  }
  return context.fail("cannot apply filter \"" + std::string(name) + "\" to type: " + std::string(operand.type_name()));
}

Value run_test(std::string_view name, const Value& operand, RenderContext& context) {
  if (name == "defined") {
    return Value(!operand.is_undefined());
  }
  if (name == "undefined") {
    return Value(operand.is_undefined());
  }
  if (name == "none") {
    return Value(operand.is_none());
  }
  if (name == "string") {
    return Value(operand.is_string());
  }
  if (name == "boolean") {
    return Value(operand.is(Kind::kBool));
  }
  if (name == "true") {
    return Value(operand.is(Kind::kBool) && operand.as_bool());
  }
  if (name == "false") {
    return Value(operand.is(Kind::kBool) && !operand.as_bool());
  }
  if (name == "number") {
    return Value(operand.is_number());
  }
  if (name == "integer") {
    return Value(operand.is(Kind::kInteger));
  }
  if (name == "float") {
    return Value(operand.is(Kind::kFloat));
  }
  if (name == "iterable") {
    return Value(operand.is(Kind::kList) || operand.is_string() || operand.is(Kind::kMapping));
  }
  if (name == "mapping") {
    return Value(operand.is(Kind::kMapping));
  }
  if (name == "sequence") {
    return Value(operand.is(Kind::kList) || operand.is(Kind::kMapping) || operand.is_string());
  }
  if (name == "callable") {
    return Value(operand.is(Kind::kFunction));
  }
  if (name == "lower" || name == "upper") {
    return Value(operand.is_string() && operand.as_string() == ascii_case(operand.as_string(), name == "upper"));
  }
  if (name == "odd" || name == "even") {
    if (!operand.is(Kind::kInteger)) {
      return context.fail("cannot " + std::string(name) + " on " + std::string(operand.type_name()));
    }
    return Value((operand.as_integer() % 2 != 0) == (name == "odd"));
  }
  return context.fail("unknown test: " + std::string(name));
}

Value binary_operation(Operator op, std::string_view operation, const Value& left, const Value& right,
                       RenderContext& context) {
  if (op == Operator::kEqual) {
    return Value(equal(left, right));
  }
  if (op == Operator::kNotEqual) {
    return Value(!equal(left, right));
  }
  bool membership = op == Operator::kIn || op == Operator::kNotIn;
  bool negate = op == Operator::kNotIn;
  if (left.is_undefined() || right.is_undefined()) {
    if (right.is_undefined() && membership) {
      return Value(negate);
    }
    return context.fail("cannot perform operation " + std::string(operation) + " on undefined values");
  }
  if (left.is_none() || right.is_none()) {
    return context.fail("cannot perform operation " + std::string(operation) + " on null values");
  }
  if (op == Operator::kConcatenate) {
    return Value(to_output(left) + to_output(right));
  }
  if (left.is_number() && right.is_number()) {
    bool floating = left.is(Kind::kFloat) || right.is(Kind::kFloat);
    double a = left.as_number();
    double b = right.as_number();
    auto number = [&](double value) { return floating ? Value(value) : Value(static_cast<std::int64_t>(value)); };
    if (op == Operator::kAdd) {
      return floating ? Value(a + b) : Value(left.as_integer() + right.as_integer());
    }
    if (op == Operator::kSubtract) {
      return floating ? Value(a - b) : Value(left.as_integer() - right.as_integer());
    }
    if (op == Operator::kMultiply) {
      return floating ? Value(a * b) : Value(left.as_integer() * right.as_integer());
    }
    if (op == Operator::kDivide) {
      return b == 0 ? context.fail("division by zero") : Value(a / b);
    }
    if (op == Operator::kFloorDivide) {
      return b == 0 ? context.fail("division by zero") : number(std::floor(a / b));
    }
    if (op == Operator::kModulo) {
      if (b == 0) {
        return context.fail("modulo by zero");
      }
      if (!floating) {
        std::int64_t remainder = left.as_integer() % right.as_integer();
        if (remainder != 0 && ((remainder < 0) != (right.as_integer() < 0))) {
          remainder += right.as_integer();
        }
        return Value(remainder);
      }
      return Value(a - b * std::floor(a / b));
    }
    if (op == Operator::kPower) {
      return number(std::pow(a, b));
    }
    if (op == Operator::kLess) {
      return Value(a < b);
    }
    if (op == Operator::kGreater) {
      return Value(a > b);
    }
    if (op == Operator::kLessEqual) {
      return Value(a <= b);
    }
    if (op == Operator::kGreaterEqual) {
      return Value(a >= b);
    }
  }
  if (left.is(Kind::kList) && right.is(Kind::kList) && op == Operator::kAdd) {
    List joined = left.as_list();
    joined.insert(joined.end(), right.as_list().begin(), right.as_list().end());
    return Value(std::move(joined));
  }
  if (right.is(Kind::kList) && membership) {
    bool found = std::any_of(right.as_list().begin(), right.as_list().end(),
                             [&](const Value& item) { return equal(item, left); });
    return Value(found != negate);
  }
  if ((left.is_string() || right.is_string()) && op == Operator::kAdd) {
    return Value(to_output(left) + to_output(right));
  }
  if (left.is_string() && right.is_string()) {
    if (membership) {
      return Value((right.as_string().find(left.as_string()) != std::string::npos) != negate);
    }
    if (op == Operator::kLess) {
      return Value(left.as_string() < right.as_string());
    }
    if (op == Operator::kGreater) {
      return Value(left.as_string() > right.as_string());
    }
    if (op == Operator::kLessEqual) {
      return Value(left.as_string() <= right.as_string());
    }
    if (op == Operator::kGreaterEqual) {
      return Value(left.as_string() >= right.as_string());
    }
  }
  if (left.is_string() && right.is(Kind::kMapping) && membership) {
    return Value((right.find(left.as_string()) != nullptr) != negate);
  }
  return context.fail("unknown operator \"" + std::string(operation) + "\" between " + std::string(left.type_name()) +
                      " and " + std::string(right.type_name()));
}

void add_globals(Scope& scope) {
  scope.set("true", Value(true));
  scope.set("false", Value(false));
  scope.set("none", Value(None{}));
  scope.set("True", Value(true));
  scope.set("False", Value(false));
  scope.set("None", Value(None{}));
  scope.set("raise_exception", Value(Function([](Arguments& arguments, RenderContext& context) {
              const Value* message = arguments.get(0, "message");
              return context.fail(message && message->is_string() ? message->as_string() : "raise_exception called");
            })));
  scope.set("namespace", Value(Function([](Arguments& arguments, RenderContext& context) -> Value {
              auto space = std::make_shared<Namespace>();
              if (!arguments.positional.empty()) {
                if (!arguments.positional[0].is(Kind::kMapping)) {
                  return context.fail("namespace expected a mapping");
                }
                space->entries = arguments.positional[0].as_mapping();
              }
              for (const auto& [key, value] : arguments.keywords) {
                space->entries.emplace_back(key, value);
              }
              return Value(std::move(space));
            })));
  scope.set("range", Value(Function([](Arguments& arguments, RenderContext& context) -> Value {
              std::vector<std::int64_t> bounds;
              for (const Value& argument : arguments.positional) {
                if (!argument.is(Kind::kInteger)) {
                  return context.fail("range() arguments must be integers");
                }
                bounds.push_back(argument.as_integer());
              }
              if (bounds.empty() || bounds.size() > 3) {
                return context.fail("range() takes 1 to 3 arguments");
              }
              std::int64_t start = bounds.size() == 1 ? 0 : bounds[0];
              std::int64_t stop = bounds.size() == 1 ? bounds[0] : bounds[1];
              std::int64_t step = bounds.size() == 3 ? bounds[2] : 1;
              if (step == 0) {
                return context.fail("range() step must not be zero");
              }
              List items;
              for (std::int64_t value = start; step > 0 ? value < stop : value > stop; value += step) {
                if (items.size() >= 1'000'000) {
                  return context.fail("range() too long");
                }
                items.emplace_back(value);
              }
              return Value(std::move(items));
            })));
  scope.set("strftime_now", Value(Function([](Arguments& arguments, RenderContext& context) -> Value {
              ++context.clock_reads;
              const Value* format = arguments.get(0, "format");
              if (!format || !format->is_string()) {
                return context.fail("strftime_now() needs a format string");
              }
              char buffer[256];
              std::size_t length = std::strftime(buffer, sizeof buffer, format->as_string().c_str(), &context.now);
              return Value(std::string(buffer, length));
            })));
}

}  // namespace kvgate::chat_template
