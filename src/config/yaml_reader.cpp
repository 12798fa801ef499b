#include "yaml_reader.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <set>
#include <sstream>

namespace kvgate::config::detail {
namespace {

std::string format_number(double value) {
  std::ostringstream text;
  text << value;
  return text.str();
}

}  // namespace

void YamlReader::problem(const YAML::Node& node, const std::string& path, std::string message) {
  problem_at_line(node.Mark().line + 1, path, std::move(message));
}

void YamlReader::problem_at_line(int line, const std::string& path, std::string message) {
  problems_.push_back(Problem{file_, line, path, std::move(message)});
}

bool YamlReader::check_mapping(const YAML::Node& node, const std::string& path,
                               std::span<const std::string_view> allowed) {
  if (!node.IsMap()) {
    problem(node, path, "expected a mapping");
    return false;
  }
  std::set<std::string> seen;
  for (const auto& entry : node) {
    const auto& key = entry.first.Scalar();
    std::string key_path = path;
    if (!key_path.empty()) {
      key_path += '.';
    }
    key_path += key;
    if (std::find(allowed.begin(), allowed.end(), key) == allowed.end()) {
      std::string known;
      for (auto name : allowed) {
        known += known.empty() ? "" : ", ";
        known += name;
      }
      problem(entry.first, key_path, "unknown key (known keys: " + known + ")");
    } else if (!seen.insert(key).second) {
      problem(entry.first, key_path, "key appears more than once");
    }
  }
  return true;
}

bool YamlReader::check_sequence(const YAML::Node& node, const std::string& path) {
  if (!node.IsSequence()) {
    problem(node, path, "expected a list");
    return false;
  }
  return true;
}

bool YamlReader::expect_scalar(const YAML::Node& node, const std::string& path, std::string_view what) {
  if (!node.IsScalar()) {
    problem(node, path, "expected " + std::string(what));
    return false;
  }
  return true;
}

void YamlReader::read(const YAML::Node& node, const std::string& path, std::string& out) {
  if (expect_scalar(node, path, "a string")) {
    out = node.Scalar();
  }
}

void YamlReader::read(const YAML::Node& node, const std::string& path, bool& out) {
  bool value = false;
  if (expect_scalar(node, path, "true or false") && YAML::convert<bool>::decode(node, value)) {
    out = value;
  } else if (node.IsScalar()) {
    problem(node, path, "expected true or false, got '" + node.Scalar() + "'");
  }
}

void YamlReader::read(const YAML::Node& node, const std::string& path, std::uint32_t& out, std::uint32_t min,
                      std::uint32_t max) {
  if (!expect_scalar(node, path, "a whole number")) {
    return;
  }
  const auto& text = node.Scalar();
  std::uint64_t value = 0;
  auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || error != std::errc{} || end != text.data() + text.size()) {
    problem(node, path, "expected a whole number, got '" + text + "'");
  } else if (value < min || value > max) {
    problem(node, path, "must be between " + std::to_string(min) + " and " + std::to_string(max));
  } else {
    out = static_cast<std::uint32_t>(value);
  }
}

void YamlReader::read(const YAML::Node& node, const std::string& path, double& out, double min, double max) {
  if (!expect_scalar(node, path, "a number")) {
    return;
  }
  const auto& text = node.Scalar();
  double value = 0;
  auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || error != std::errc{} || end != text.data() + text.size() || !std::isfinite(value)) {
    problem(node, path, "expected a number, got '" + text + "'");
  } else if (value < min || value > max) {
    problem(node, path, "must be between " + format_number(min) + " and " + format_number(max));
  } else {
    out = value;
  }
}

void YamlReader::read_duration(const YAML::Node& node, const std::string& path, Milliseconds& out, Milliseconds min) {
  if (!expect_scalar(node, path, "a duration such as 250ms, 5s or 2m")) {
    return;
  }
  auto value = parse_duration(node.Scalar());
  if (!value) {
    problem(node, path, "invalid duration '" + node.Scalar() + "' (write e.g. 250ms, 5s, 2m, 1h)");
  } else if (*value < min) {
    problem(node, path, "must be at least " + format_duration(min));
  } else {
    out = *value;
  }
}

void YamlReader::read_byte_size(const YAML::Node& node, const std::string& path, std::uint64_t& out, std::uint64_t min,
                                std::uint64_t max) {
  if (!expect_scalar(node, path, "a size such as 65536, 64KiB or 16MiB")) {
    return;
  }
  auto value = parse_byte_size(node.Scalar());
  if (!value) {
    problem(node, path, "invalid size '" + node.Scalar() + "' (write e.g. 65536, 64KiB, 16MiB)");
  } else if (*value < min || *value > max) {
    problem(node, path, "must be between " + std::to_string(min) + " and " + std::to_string(max) + " bytes");
  } else {
    out = *value;
  }
}

}  // namespace kvgate::config::detail
