#pragma once
// Every configuration key, declared once: its path, its kind, its default
// as written in YAML and one line of documentation. The loader takes the
// keys each mapping accepts from here (a key missing from the table is an
// unknown key), `kvgate config-reference` prints the reference
// (docs/configuration.md) from here, and tests hold the loader, the typed
// defaults (options.hpp), the example config and the reference to it.
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace kvgate::config {

enum class OptionKind : std::uint8_t {
  section,  // a mapping of further keys
  list,     // a sequence (of mappings, or of strings for api_keys)
  boolean,
  integer,
  number,
  duration,   // 250ms, 5s, 2m, 1h
  byte_size,  // bytes, or KiB/MiB/GiB (1024) and KB/MB/GB (1000)
  text,
  address,  // host:port
  choice,   // one of the words its documentation lists
};
std::string_view to_string(OptionKind kind);

struct OptionSpec {
  // Dotted; "[]" marks a list's items: "models[].workers[].url".
  std::string_view path;
  OptionKind kind;
  // As written in YAML; empty: no default (required, or unset means off).
  std::string_view default_text;
  std::string_view doc;
};

std::span<const OptionSpec> option_table();

// The keys directly under `path` ("" for the top level), in table order.
std::vector<std::string_view> keys_under(std::string_view path);

// The configuration reference in Markdown: one table per section.
std::string configuration_reference();

}  // namespace kvgate::config
