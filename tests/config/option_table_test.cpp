// The option table is the one declaration of every key: these tests hold
// the loader, the typed defaults, the example config and the generated
// reference to it, each failing when one of them goes its own way.
#include "kvgate/config/option_table.hpp"

#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <optional>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "../support/text_file.hpp"
#include "kvgate/config/loader.hpp"

namespace kvgate::config {
namespace {

// A configuration as a tree of keys, rendered as YAML flow style with each
// leaf's text as written (quoted when YAML needs it).
struct Tree {
  std::optional<std::string> leaf;
  // Two vectors, not one of pairs: a pair needs Tree complete here.
  std::vector<std::string> names;
  std::vector<Tree> children;
  bool list_of_one = false;  // rendered as [ {keys} ]

  Tree& at(const std::string& key) {
    for (std::size_t index = 0; index < names.size(); ++index) {
      if (names[index] == key) {
        return children[index];
      }
    }
    names.push_back(key);
    return children.emplace_back();
  }

  void erase(const std::string& key) {
    for (std::size_t index = 0; index < names.size(); ++index) {
      if (names[index] == key) {
        names.erase(names.begin() + static_cast<std::ptrdiff_t>(index));
        children.erase(children.begin() + static_cast<std::ptrdiff_t>(index));
        return;
      }
    }
  }

  [[nodiscard]] std::string render() const {
    if (leaf) {
      const bool plain = std::regex_match(*leaf, std::regex(R"([A-Za-z0-9_.+-]*)")) && !leaf->empty();
      return plain ? *leaf : "\"" + *leaf + "\"";
    }
    std::string text = "{";
    for (std::size_t index = 0; index < names.size(); ++index) {
      text += (index == 0 ? "" : ", ") + names[index] + ": " + children[index].render();
    }
    text += "}";
    return list_of_one ? "[" + text + "]" : text;
  }
};

// Walks a table path ("models[].workers[].url") in the tree, making what is
// missing; list items are the list's one item.
Tree& place(Tree& root, std::string_view path) {
  Tree* node = &root;
  while (!path.empty()) {
    const auto dot = path.find('.');
    std::string segment(path.substr(0, dot));
    path = dot == std::string_view::npos ? std::string_view() : path.substr(dot + 1);
    const bool list = segment.ends_with("[]");
    if (list) {
      segment.resize(segment.size() - 2);
    }
    node = &node->at(segment);
    if (list) {
      node->list_of_one = true;
    }
  }
  return *node;
}

// The smallest configuration every key can be added to: one model with one
// worker and DNS discovery, one tenant.
Tree base_config() {
  Tree root;
  place(root, "models[].name").leaf = "m";
  place(root, "models[].workers[].id").leaf = "w";
  place(root, "models[].workers[].url").leaf = "http://127.0.0.1:1";
  place(root, "models[].workers_from.dns.name").leaf = "workers.example";
  place(root, "models[].workers_from.dns.port").leaf = "8000";
  place(root, "tenants[].name").leaf = "t";
  place(root, "tenants[].api_key_sha256").leaf = std::string(64, 'a');
  return root;
}

// "models[].workers[].url" -> "models[0].workers[0].url", as problems name it.
std::string concrete(std::string_view path) {
  return std::regex_replace(std::string(path), std::regex(R"(\[\])"), "[0]");
}

bool is_scalar(const OptionSpec& option) {
  return option.kind != OptionKind::section && option.kind != OptionKind::list;
}

TEST(OptionTable, PathsAreUniqueAndEveryKeyHasItsSection) {
  std::set<std::string_view> seen;
  for (const auto& option : option_table()) {
    EXPECT_TRUE(seen.insert(option.path).second) << option.path;
    EXPECT_FALSE(option.doc.empty()) << option.path;
    const auto dot = option.path.rfind('.');
    if (dot != std::string_view::npos) {
      auto parent = option.path.substr(0, dot);
      if (parent.ends_with("[]")) {
        parent.remove_suffix(2);
      }
      EXPECT_TRUE(seen.contains(parent)) << option.path << " comes before its section " << parent;
    }
  }
  EXPECT_GE(seen.size(), 140u);
}

// A key in the table that the loader did not read would be accepted and
// ignored: each key given a value of the wrong kind must be reported at
// its own path. (A key the loader reads but the table lacks is an unknown
// key, which the loader's own tests and the example config catch.)
TEST(OptionTable, TheLoaderReadsEveryKeyOfTheTable) {
  for (const auto& option : option_table()) {
    auto root = base_config();
    if (option.path.starts_with("tenants[].api_key_")) {
      // A tenant gives exactly one key source.
      place(root, "tenants[]").erase("api_key_sha256");
    }
    auto& target = place(root, option.path);
    target = Tree{};
    if (is_scalar(option)) {
      target.at("not_a").leaf = "scalar";  // a mapping where a scalar belongs
    } else {
      target.leaf = "7";  // a scalar where a mapping or a list belongs
    }
    const auto text = root.render();
    auto loaded = load_text(text, "table.yaml");
    ASSERT_FALSE(loaded) << option.path << " accepted a wrong value: " << text;
    const auto expected = concrete(option.path);
    bool named = false;
    std::string problems;
    for (const auto& problem : loaded.error()) {
      named = named || problem.path == expected;
      problems += problem.to_string() + "\n";
    }
    EXPECT_TRUE(named) << option.path << ": no problem at " << expected << "\n" << problems;
  }
}

// The defaults the table documents are the ones the loader applies: every
// key set to its documented default loads to the same options as leaving
// it out.
TEST(OptionTable, EveryDocumentedDefaultIsTheLoadersDefault) {
  std::size_t checked = 0;
  for (const auto& option : option_table()) {
    if (option.default_text.empty() || !is_scalar(option)) {
      continue;
    }
    auto root = base_config();
    // Keys of the sequences cache model are refused without it.
    const auto dot = option.path.rfind('.');
    const auto key = option.path.substr(dot + 1);
    if (key == "slot_similarity" || key == "cache_ram_mib") {
      const std::string parent(option.path.substr(0, dot));
      place(root, parent + ".cache_model").leaf = "sequences";
      place(root, parent + ".slots").leaf = "2";
    }
    // A disaggregation section makes the model disaggregated: present in
    // both files, through another of its keys.
    if (option.path.starts_with("models[].disaggregation.")) {
      const bool protocol = key == "protocol";
      place(root, protocol ? "models[].disaggregation.local_prefill_ratio" : "models[].disaggregation.protocol").leaf =
          protocol ? "0.7" : "vllm";
    }
    // A cluster section makes the replica join a cluster: present in both
    // files, through another of its keys.
    if (option.path.starts_with("cluster.")) {
      const bool id = key == "replica_id";
      place(root, id ? "cluster.stream" : "cluster.replica_id").leaf = id ? "kvgate" : "r1";
    }
    auto base = load_text(root.render(), "base.yaml");
    ASSERT_TRUE(base) << option.path << ": " << base.error().front().to_string();
    place(root, option.path).leaf = std::string(option.default_text);
    auto loaded = load_text(root.render(), "default.yaml");
    ASSERT_TRUE(loaded) << option.path << ": " << loaded.error().front().to_string();
    EXPECT_TRUE(*loaded == *base) << option.path << ": the documented default " << option.default_text
                                  << " is not what the loader applies without it";
    ++checked;
  }
  EXPECT_GE(checked, 80u);
}

// The example config shows every key of the table, in place, with the
// table's default, and no key the table lacks. Commented keys count: a
// line "# key: value" stands for the key at the column after "# ".
TEST(OptionTable, TheExampleConfigShowsEveryKeyWithItsDefault) {
  std::set<std::string_view> names;
  for (const auto& option : option_table()) {
    auto name = option.path.substr(option.path.rfind('.') + 1);
    names.insert(name.ends_with("[]") ? name.substr(0, name.size() - 2) : name);
  }
  std::map<std::string, std::string> shown;  // table path -> value as written
  std::vector<std::pair<std::size_t, std::string>> stack;
  std::istringstream lines(test_support::read_text_file(KVGATE_SOURCE_DIR "/config/kvgate.example.yaml"));
  static const std::regex kKey(R"(^( *)(# ?)?( *)(- )?([a-z_0-9]+):(.*)$)");
  for (std::string line; std::getline(lines, line);) {
    std::smatch match;
    if (!std::regex_match(line, match, kKey)) {
      continue;
    }
    const std::string key = match[5];
    if (match[2].matched && !names.contains(key)) {
      continue;  // prose in a comment ("none: tenants share ...")
    }
    std::size_t indent = match[1].length() + match[3].length();
    const bool item = match[4].matched;
    if (item) {
      indent += 2;
    }
    while (!stack.empty() && stack.back().first >= indent) {
      stack.pop_back();
    }
    if (item && !stack.empty() && !stack.back().second.ends_with("[]")) {
      stack.back().second += "[]";
    }
    std::string path;
    for (const auto& [level, segment] : stack) {
      path += segment + ".";
    }
    path += key;
    std::string value = match[6];
    // The value: up to a comment, quotes and spaces off.
    bool quoted = false;
    for (std::size_t at = 0; at < value.size(); ++at) {
      quoted = value[at] == '"' ? !quoted : quoted;
      if (value[at] == '#' && !quoted) {
        value.resize(at);
        break;
      }
    }
    value = std::regex_replace(value, std::regex(R"(^\s+|\s+$|")"), "");
    // A flow mapping on one line: its keys are children.
    std::smatch flow;
    if (std::regex_match(value, flow, std::regex(R"(\{(.*)\})"))) {
      const std::string inner = flow[1];
      static const std::regex kPair(R"(([a-z_0-9]+):\s*([^,]*))");
      for (std::sregex_iterator it(inner.begin(), inner.end(), kPair), end; it != end; ++it) {
        shown[path + "." + (*it)[1].str()] = std::regex_replace((*it)[2].str(), std::regex(R"(\s+$)"), "");
      }
      value.clear();
    }
    shown.emplace(path, value);
    stack.emplace_back(indent, key);
  }
  for (const auto& option : option_table()) {
    const std::string path(option.path);
    const auto found = shown.find(path);
    if (found == shown.end()) {
      ADD_FAILURE() << path << " is in the table but not in the example config";
      continue;
    }
    if (!option.default_text.empty() && is_scalar(option)) {
      EXPECT_EQ(found->second, option.default_text) << path << ": the example shows another default";
    }
  }
  for (const auto& [path, value] : shown) {
    bool known = false;
    for (const auto& option : option_table()) {
      known = known || option.path == path;
    }
    EXPECT_TRUE(known) << path << " is in the example config but not in the table";
  }
}

TEST(OptionTable, TheReferenceInTheDocsIsTheGeneratedOne) {
  EXPECT_TRUE(test_support::read_text_file(KVGATE_SOURCE_DIR "/docs/configuration.md") == configuration_reference())
      << "regenerate it: build/src/kvgate config-reference > docs/configuration.md";
}

TEST(OptionTable, KeysUnderASectionAreItsDirectChildren) {
  EXPECT_EQ(keys_under("upstream"), (std::vector<std::string_view>{"retries", "retry_budget", "max_idle_connections",
                                                                   "idle_connection_timeout"}));
  EXPECT_EQ(keys_under("upstream.retry_budget"), (std::vector<std::string_view>{"ratio", "min_retries_per_second"}));
  const auto top = keys_under("");
  EXPECT_NE(std::find(top.begin(), top.end(), "models"), top.end());
  EXPECT_EQ(std::find(top.begin(), top.end(), "retries"), top.end());
}

}  // namespace
}  // namespace kvgate::config
