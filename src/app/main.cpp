// kvgate command line: run the gateway, validate a config file.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstring>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include "kvgate/app/cpus.hpp"
#include "kvgate/app/gateway.hpp"
#include "kvgate/config/loader.hpp"
#include "kvgate/config/option_table.hpp"
#include "kvgate/core/units.hpp"
#include "tokenize_command.hpp"

namespace {

constexpr int kExitUsage = 64;
constexpr int kExitBadConfig = 2;
// Each thread adds its tokenizer workspace and allocator heap (about 19 MB
// resident with Qwen3).
constexpr unsigned kMaxTokenizeThreads = 256;

unsigned default_tokenize_threads() {
  return std::clamp(kvgate::app::available_cpus(), 1U, kMaxTokenizeThreads);
}

std::optional<unsigned> parse_threads(const std::string& text) {
  const auto value = kvgate::parse_whole_number(text);
  if (!value || *value < 1 || *value > kMaxTokenizeThreads) {
    return std::nullopt;
  }
  return static_cast<unsigned>(*value);
}

void print_help() {
  std::cout << "kvgate " << KVGATE_VERSION << ": cache-aware routing gateway for LLM serving\n\n"
            << "usage:\n"
            << "  kvgate --config FILE [--log-level LEVEL]   run the gateway\n"
            << "  kvgate check-config FILE                    validate a config file (exit 0 or 2)\n"
            << "  kvgate config-reference                     every configuration key, in Markdown\n"
            << "  kvgate tokenize --tokenizer DIR [--chat] [--threads N]\n"
            << "                                              JSON lines on stdin -> token ids on stdout, in order;\n"
            << "                                              N lines at a time (default: one per usable CPU)\n"
            << "  kvgate --version | --help\n\n"
            << "signals: SIGTERM/SIGINT drain and exit, SIGHUP reloads the config file\n"
            << "log levels: trace, debug, info, warn, error, off\n";
}

int check_config(const std::string& path) {
  auto loaded = kvgate::config::load_file(path);
  if (!loaded) {
    for (const auto& problem : loaded.error()) {
      std::cerr << problem.to_string() << '\n';
    }
    std::cerr << loaded.error().size() << " problem(s) in " << path << '\n';
    return kExitBadConfig;
  }
  for (const auto& deprecation : loaded->deprecations) {
    std::cerr << path << ": warning: " << deprecation << '\n';
  }
  std::cout << path << ": OK (" << loaded->models.size() << " model(s))\n";
  return 0;
}

int run_gateway(const std::string& path, const std::optional<std::string>& log_level) {
  auto loaded = kvgate::config::load_file(path);
  if (!loaded) {
    for (const auto& problem : loaded.error()) {
      std::cerr << problem.to_string() << '\n';
    }
    return kExitBadConfig;
  }
  auto options = std::make_shared<kvgate::config::Options>(std::move(*loaded));
  if (log_level) {
    if (spdlog::level::from_str(*log_level) == spdlog::level::off && *log_level != "off") {
      std::cerr << "unknown log level '" << *log_level << "'\n";
      return kExitUsage;
    }
    options->log_level = *log_level;
  }
  kvgate::app::setup_logging(options->log_level);
  for (const auto& deprecation : options->deprecations) {
    spdlog::warn("config: {}", deprecation);
  }
  kvgate::app::Gateway gateway(path, std::move(options));
  return gateway.run();
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  if (args.empty() || args[0] == "--help" || args[0] == "-h") {
    print_help();
    return args.empty() ? kExitUsage : 0;
  }
  if (args[0] == "--version") {
    std::cout << "kvgate " << KVGATE_VERSION << '\n';
    return 0;
  }
  if (args[0] == "check-config") {
    if (args.size() != 2) {
      std::cerr << "usage: kvgate check-config FILE\n";
      return kExitUsage;
    }
    return check_config(args[1]);
  }
  if (args[0] == "config-reference") {
    std::cout << kvgate::config::configuration_reference();
    return 0;
  }
  if (args[0] == "tokenize") {
    std::optional<std::string> folder;
    bool chat = false;
    unsigned threads = default_tokenize_threads();
    for (std::size_t index = 1; index < args.size(); ++index) {
      if (args[index] == "--tokenizer" && index + 1 < args.size()) {
        folder = args[++index];
      } else if (args[index] == "--chat") {
        chat = true;
      } else if (args[index] == "--threads" && index + 1 < args.size()) {
        auto parsed = parse_threads(args[++index]);
        if (!parsed) {
          std::cerr << "kvgate tokenize: --threads takes a whole number from 1 to " << kMaxTokenizeThreads << ", not '"
                    << args[index] << "'\n";
          return kExitUsage;
        }
        threads = *parsed;
      } else {
        folder.reset();
        break;
      }
    }
    if (!folder) {
      std::cerr << "usage: kvgate tokenize --tokenizer DIR [--chat] [--threads N]\n";
      return kExitUsage;
    }
    // Buffered standard streams: synchronised with stdio, std::getline
    // read stdin a character at a time (a tenth of the command's time).
    std::ios::sync_with_stdio(false);
    return kvgate::app::run_tokenize(*folder, chat, threads, std::cin, std::cout, std::cerr);
  }
  std::optional<std::string> config_path;
  std::optional<std::string> log_level;
  for (std::size_t index = 0; index < args.size(); ++index) {
    const bool has_value = index + 1 < args.size();
    if (args[index] == "--config" && has_value) {
      config_path = args[++index];
    } else if (args[index] == "--log-level" && has_value) {
      log_level = args[++index];
    } else {
      std::cerr << "unknown or incomplete argument '" << args[index] << "' (see kvgate --help)\n";
      return kExitUsage;
    }
  }
  if (!config_path) {
    std::cerr << "missing --config FILE (see kvgate --help)\n";
    return kExitUsage;
  }
  return run_gateway(*config_path, log_level);
}
