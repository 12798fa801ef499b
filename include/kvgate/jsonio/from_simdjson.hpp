#pragma once
// A simdjson DOM element as an nlohmann document (json or ordered_json), for
// the translation units that parse with simdjson themselves (jsonio,
// tokenizer.json). Kept out of the public parse.hpp: it brings simdjson's
// header along.
#include <simdjson.h>

#include <cstdint>
#include <string>
#include <string_view>

namespace kvgate::jsonio {

// Numbers keep nlohmann's own kinds: non-negative integers are unsigned,
// negative ones signed, the rest floating point. A repeated key keeps its
// last value (in the first key's place, for ordered_json), as nlohmann's
// parser does. Recursion is bounded by simdjson's depth limit (1024).
template <typename Json>
Json from_simdjson(simdjson::dom::element element) {
  namespace dom = simdjson::dom;
  switch (element.type()) {
    case dom::element_type::OBJECT: {
      Json object = Json::object();
      for (dom::key_value_pair field : dom::object(element)) {
        object[std::string(field.key)] = from_simdjson<Json>(field.value);
      }
      return object;
    }
    case dom::element_type::ARRAY: {
      Json array = Json::array();
      for (dom::element item : dom::array(element)) {
        array.push_back(from_simdjson<Json>(item));
      }
      return array;
    }
    case dom::element_type::STRING:
      return Json(std::string(std::string_view(element)));
    case dom::element_type::INT64: {
      const auto value = std::int64_t(element);
      return value >= 0 ? Json(static_cast<std::uint64_t>(value)) : Json(value);
    }
    case dom::element_type::UINT64:
      return Json(std::uint64_t(element));
    case dom::element_type::DOUBLE:
      return Json(double(element));
    case dom::element_type::BOOL:
      return Json(bool(element));
    case dom::element_type::NULL_VALUE:
      return Json(nullptr);
  }
  return Json(nullptr);
}

}  // namespace kvgate::jsonio
