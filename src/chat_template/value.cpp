#include "kvgate/chat_template/value.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <nlohmann/json.hpp>

#include "kvgate/core/utf8.hpp"

namespace kvgate::chat_template {

bool Value::truthy() const {
  switch (kind()) {
    case Kind::kUndefined:
    case Kind::kNone:
      return false;
    case Kind::kBool:
      return as_bool();
    case Kind::kInteger:
      return as_integer() != 0;
    case Kind::kFloat:
      return as_float() != 0.0;
    case Kind::kString:
      return !as_string().empty();
    case Kind::kList:
      return !as_list().empty();
    case Kind::kMapping:
      return !as_mapping().empty();
    case Kind::kNamespace:
    case Kind::kFunction:
      return true;
  }
  return false;
}

const Value* Value::find(std::string_view key) const {
  const Mapping* entries = nullptr;
  if (is(Kind::kMapping)) {
    entries = &as_mapping();
  }
  if (is(Kind::kNamespace)) {
    entries = &as_namespace().entries;
  }
  if (entries == nullptr) {
    return nullptr;
  }
  for (const auto& [name, value] : *entries) {
    if (name == key) {
      return &value;
    }
  }
  return nullptr;
}

std::string_view Value::type_name() const {
  static constexpr std::string_view kNames[] = {"undefined", "none", "boolean", "integer",   "float",
                                                "string",    "list", "mapping", "namespace", "function"};
  return kNames[static_cast<std::size_t>(kind())];
}

Value Value::from_json(const nlohmann::ordered_json& json, const std::shared_ptr<const void>& owner) {
  switch (json.type()) {
    case nlohmann::ordered_json::value_t::null:
      return Value(None{});
    case nlohmann::ordered_json::value_t::boolean:
      return Value(json.get<bool>());
    case nlohmann::ordered_json::value_t::number_integer:
      return Value(json.get<std::int64_t>());
    case nlohmann::ordered_json::value_t::number_unsigned:
      return Value(static_cast<std::int64_t>(json.get<std::uint64_t>()));
    case nlohmann::ordered_json::value_t::number_float:
      return Value(json.get<double>());
    case nlohmann::ordered_json::value_t::string:
      return text_in(owner, json.get_ref<const std::string&>());
    case nlohmann::ordered_json::value_t::array: {
      List list;
      list.reserve(json.size());
      for (const auto& item : json) {
        list.push_back(from_json(item, owner));
      }
      return Value(std::move(list));
    }
    case nlohmann::ordered_json::value_t::object: {
      Mapping mapping;
      mapping.reserve(json.size());
      for (const auto& [key, item] : json.items()) {
        mapping.emplace_back(key, from_json(item, owner));
      }
      return Value(std::move(mapping));
    }
    default:
      return Value();
  }
}

const Value* Arguments::get(std::size_t index, std::string_view name) const {
  if (index < positional.size()) {
    return &positional[index];
  }
  for (const auto& [key, value] : keywords) {
    if (key == name) {
      return &value;
    }
  }
  return nullptr;
}

namespace {

// JavaScript's Number.prototype.toString for finite doubles: the shortest
// digits that round-trip, plain notation from 1e-7 to 1e21.
void append_shortest(std::string& out, double number) {
  if (std::isnan(number)) {
    out += "NaN";
    return;
  }
  if (std::isinf(number)) {
    out += number < 0 ? "-Infinity" : "Infinity";
    return;
  }
  char buffer[64];
  double magnitude = std::fabs(number);
  auto format = (magnitude != 0.0 && (magnitude < 1e-7 || magnitude >= 1e21)) ? std::chars_format::scientific
                                                                              : std::chars_format::fixed;
  auto result = std::to_chars(buffer, buffer + sizeof buffer, number, format);
  std::string text(buffer, result.ptr);
  if (format == std::chars_format::scientific) {
    // to_chars writes e+21 / e-07; JavaScript writes e+21 / e-7.
    auto exponent = text.find('e');
    std::string mantissa = text.substr(0, exponent);
    char sign = text[exponent + 1];
    std::string digits = text.substr(exponent + 2);
    digits.erase(0, std::min(digits.find_first_not_of('0'), digits.size() - 1));
    text = mantissa + "e" + sign + digits;
  }
  out += text;
}

void append_float_output(std::string& out, double number) {
  if (number == 0.0 && std::signbit(number)) {
    out += "-0.0";
    return;
  }
  append_shortest(out, number);
  if (std::isfinite(number) && number == std::floor(number) && std::fabs(number) < 1e21) {
    out += ".0";
  }
}

void append_json_string(std::string& out, std::string_view text, bool ensure_ascii) {
  static constexpr char kHex[] = "0123456789abcdef";
  out += '"';
  std::size_t position = 0;
  while (position < text.size()) {
    auto byte = static_cast<unsigned char>(text[position]);
    if (byte >= 0x80) {
      std::size_t start = position;
      char32_t code_point = kvgate::next_code_point(text, position);
      if (!ensure_ascii) {
        out.append(text.substr(start, position - start));
        continue;
      }
      auto append_unit = [&](unsigned unit) {
        out += "\\u";
        for (int shift = 12; shift >= 0; shift -= 4) {
          out += kHex[(unit >> shift) & 15];
        }
      };
      if (code_point >= 0x10000) {
        code_point -= 0x10000;
        append_unit(0xD800 + (code_point >> 10));
        append_unit(0xDC00 + (code_point & 0x3FF));
      } else {
        append_unit(code_point);
      }
      continue;
    }
    ++position;
    switch (byte) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\b':
        out += "\\b";
        break;
      case '\f':
        out += "\\f";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (byte < 0x20 || (ensure_ascii && byte == 0x7F)) {
          out += "\\u00";
          out += kHex[byte >> 4];
          out += kHex[byte & 15];
        } else {
          out += static_cast<char>(byte);
        }
    }
  }
  out += '"';
}

void append_newline_indent(std::string& out, const JsonOptions& options, int depth) {
  out += '\n';
  out.append(static_cast<std::size_t>(options.indent) * static_cast<std::size_t>(depth), ' ');
}

constexpr int kMaxJsonDepth = 256;

}  // namespace

bool append_json(std::string& out, const Value& value, const JsonOptions& options, int depth) {
  // A namespace is shared by reference, so a template can put one inside
  // itself: deeper than any JSON a chat carries is taken as that cycle.
  if (depth > kMaxJsonDepth) {
    return false;
  }
  const bool indenting = options.indent >= 0;
  const std::string item_separator = !options.item_separator.empty() ? options.item_separator : indenting ? "," : ", ";
  const std::string key_separator = options.key_separator.empty() ? ": " : options.key_separator;
  switch (value.kind()) {
    case Value::Kind::kUndefined:
    case Value::Kind::kNone:
      out += "null";
      return true;
    case Value::Kind::kBool:
      out += value.as_bool() ? "true" : "false";
      return true;
    case Value::Kind::kInteger:
      out += std::to_string(value.as_integer());
      return true;
    case Value::Kind::kFloat:
      append_shortest(out, value.as_float());
      return true;
    case Value::Kind::kString:
      append_json_string(out, value.as_string(), options.ensure_ascii);
      return true;
    case Value::Kind::kList: {
      const List& list = value.as_list();
      out += '[';
      for (std::size_t index = 0; index < list.size(); ++index) {
        if (index > 0) {
          out += item_separator;
        }
        if (indenting) {
          append_newline_indent(out, options, depth + 1);
        }
        if (!append_json(out, list[index], options, depth + 1)) {
          return false;
        }
      }
      if (indenting && !list.empty()) {
        append_newline_indent(out, options, depth);
      }
      out += ']';
      return true;
    }
    case Value::Kind::kMapping:
    case Value::Kind::kNamespace: {
      Mapping entries = value.is(Value::Kind::kMapping) ? value.as_mapping() : value.as_namespace().entries;
      if (options.sort_keys) {
        std::stable_sort(entries.begin(), entries.end(),
                         [](const auto& left, const auto& right) { return left.first < right.first; });
      }
      out += '{';
      for (std::size_t index = 0; index < entries.size(); ++index) {
        if (index > 0) {
          out += item_separator;
        }
        if (indenting) {
          append_newline_indent(out, options, depth + 1);
        }
        append_json_string(out, entries[index].first, options.ensure_ascii);
        out += key_separator;
        if (!append_json(out, entries[index].second, options, depth + 1)) {
          return false;
        }
      }
      if (indenting && !entries.empty()) {
        append_newline_indent(out, options, depth);
      }
      out += '}';
      return true;
    }
    case Value::Kind::kFunction:
      return false;
  }
  return false;
}

void append_output(std::string& out, const Value& value) {
  switch (value.kind()) {
    case Value::Kind::kUndefined:
    case Value::Kind::kNone:
      return;
    case Value::Kind::kBool:
      out += value.as_bool() ? "true" : "false";
      return;
    case Value::Kind::kInteger:
      out += std::to_string(value.as_integer());
      return;
    case Value::Kind::kFloat:
      append_float_output(out, value.as_float());
      return;
    case Value::Kind::kString:
      out += value.as_string();
      return;
    case Value::Kind::kList:
    case Value::Kind::kMapping:
    case Value::Kind::kNamespace:
      append_json(out, value, JsonOptions{});
      return;
    case Value::Kind::kFunction:
      out += "<function>";
      return;
  }
}

namespace {

std::size_t text_bytes_at(const Value& value, int depth, std::size_t enough) {
  constexpr int kTextDepth = 4;
  if (value.is_string()) {
    return value.as_string().size();
  }
  std::size_t total = 0;
  if (depth < kTextDepth && value.is(Value::Kind::kList)) {
    for (const Value& item : value.as_list()) {
      total += text_bytes_at(item, depth + 1, enough - std::min(enough, total));
      if (total >= enough) {
        break;
      }
    }
  } else if (depth < kTextDepth && value.is(Value::Kind::kMapping)) {
    for (const auto& [key, item] : value.as_mapping()) {
      total += text_bytes_at(item, depth + 1, enough - std::min(enough, total));
      if (total >= enough) {
        break;
      }
    }
  }
  return total;
}

}  // namespace

std::size_t text_bytes(const Value& value, std::size_t enough) {
  return text_bytes_at(value, 0, enough);
}

std::string to_output(const Value& value) {
  std::string out;
  append_output(out, value);
  return out;
}

bool equal(const Value& left, const Value& right) {
  if (left.is_number() && right.is_number()) {
    if (left.is(Value::Kind::kInteger) && right.is(Value::Kind::kInteger)) {
      return left.as_integer() == right.as_integer();
    }
    return left.as_number() == right.as_number();
  }
  if (left.kind() != right.kind()) {
    return false;
  }
  switch (left.kind()) {
    case Value::Kind::kUndefined:
    case Value::Kind::kNone:
      return true;
    case Value::Kind::kBool:
      return left.as_bool() == right.as_bool();
    case Value::Kind::kString:
      return left.as_string() == right.as_string();
    case Value::Kind::kList:
      return std::equal(left.as_list().begin(), left.as_list().end(), right.as_list().begin(), right.as_list().end(),
                        [](const Value& a, const Value& b) { return equal(a, b); });
    case Value::Kind::kMapping: {
      const Mapping& a = left.as_mapping();
      if (a.size() != right.as_mapping().size()) {
        return false;
      }
      return std::all_of(a.begin(), a.end(), [&](const auto& entry) {
        const Value* other = right.find(entry.first);
        return other != nullptr && equal(entry.second, *other);
      });
    }
    case Value::Kind::kNamespace:
      return &left.as_namespace() == &right.as_namespace();
    default:
      return false;
  }
}

}  // namespace kvgate::chat_template
