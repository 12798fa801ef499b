#pragma once
// Typed, problem-collecting accessors over yaml-cpp nodes. Internal to the
// config module: yaml-cpp never appears in a public header.
#include <yaml-cpp/yaml.h>

#include <cstdint>
#include <initializer_list>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "kvgate/config/loader.hpp"

namespace kvgate::config::detail {

class YamlReader {
 public:
  YamlReader(std::string file, std::vector<Problem>& problems) : file_(std::move(file)), problems_(problems) {}

  void problem(const YAML::Node& node, const std::string& path, std::string message);
  void problem_at_line(int line, const std::string& path, std::string message);

  // True when node is a mapping whose keys are all in `allowed`, each once.
  // Reports every unknown or repeated key; false only when node is no mapping.
  bool check_mapping(const YAML::Node& node, const std::string& path, std::initializer_list<std::string_view> allowed) {
    return check_mapping(node, path, std::span<const std::string_view>(allowed.begin(), allowed.size()));
  }
  bool check_mapping(const YAML::Node& node, const std::string& path, std::span<const std::string_view> allowed);
  bool check_sequence(const YAML::Node& node, const std::string& path);

  // Each reader leaves `out` unchanged (the default) and records a problem
  // when the value has the wrong type or is out of range.
  void read(const YAML::Node& node, const std::string& path, std::string& out);
  void read(const YAML::Node& node, const std::string& path, bool& out);
  void read(const YAML::Node& node, const std::string& path, std::uint32_t& out, std::uint32_t min, std::uint32_t max);
  void read(const YAML::Node& node, const std::string& path, double& out, double min, double max);
  void read_duration(const YAML::Node& node, const std::string& path, Milliseconds& out, Milliseconds min);
  void read_byte_size(const YAML::Node& node, const std::string& path, std::uint64_t& out, std::uint64_t min,
                      std::uint64_t max);

  // Convenience for `parent[key]` when present.
  template <class Reader>
  void optional(const YAML::Node& parent, const std::string& path, const char* key, Reader&& reader) {
    if (auto child = parent[key]; child) {
      reader(child, path.empty() ? std::string(key) : path + "." + key);
    }
  }

 private:
  bool expect_scalar(const YAML::Node& node, const std::string& path, std::string_view what);

  std::string file_;
  std::vector<Problem>& problems_;
};

}  // namespace kvgate::config::detail
