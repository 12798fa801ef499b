// Arbitrary bytes as a config file: the loader returns options or problems
// with a message each; it never crashes or throws.
#include <cstddef>
#include <cstdint>
#include <string>

#include "kvgate/config/loader.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string text(reinterpret_cast<const char*>(data), size);
  auto loaded = kvgate::config::load_text(text, "fuzz.yaml");
  if (!loaded) {
    for (const auto& problem : loaded.error()) {
      if (problem.message.empty()) {
        __builtin_trap();
      }
    }
  }
  return 0;
}
