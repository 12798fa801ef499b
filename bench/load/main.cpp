// kvgate-bench: drives a workload (sessions or a trace) against a target
// and reports the prefix-cache hit rate per turn, time to first token and
// load balance; `compare` runs the identical workload against several
// targets (for example kvgate under different policies), resetting the
// replicas' caches before each, and reports them side by side.
#include <zlib.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

#include "report.hpp"
#include "runner.hpp"
#include "workload.hpp"

namespace {

using kvgate::load::RunOptions;
using kvgate::load::WorkloadOptions;
using nlohmann::json;

constexpr const char* kUsage =
    "usage: kvgate-bench run --target URL --workload FILE|PRESET --out DIR [options]\n"
    "       kvgate-bench compare --run NAME=URL [--run NAME=URL ...] --workload FILE|PRESET --out DIR [options]\n"
    "options:\n"
    "  --sessions N            sessions of a preset, or the first N of a file (default: preset's / all)\n"
    "  --concurrency N         sessions in flight at once (default 8; traces run open loop)\n"
    "  --duration S            stop starting requests after S seconds (default: the whole workload)\n"
    "  --seed N                preset generator seed (default 1)\n"
    "  --model NAME            model to request (default: the target's first in /v1/models)\n"
    "  --reset URL             replica whose prefix cache is reset before each run (repeatable)\n"
    "  --name NAME             run: the run's name in the report (default: run)\n"
    "  --max-requests N        traces: the first N requests\n"
    "  --time-scale X          traces: arrival and think times divided by X (default 1)\n"
    "  --max-think-ms N        recorded sessions: cap each (scaled) think time at N ms\n"
    "  --trace-block-tokens N  traces: tokens per hash id (default: the trace's own, Mooncake 512, WEKA 64)\n"
    "presets: chat, agent\n";

struct Command {
  std::string mode;
  std::vector<std::pair<std::string, std::string>> runs;  // name, target
  std::string workload;
  std::string out;
  std::vector<std::string> resets;
  WorkloadOptions workload_options;
  RunOptions run_options;
};

template <class Number>
bool read_number(const std::string& text, Number& out) {
  std::istringstream stream(text);
  stream >> out;
  return !stream.fail() && stream.eof();
}

// Returns an error message, or "" when the command line is usable.
std::string parse(int argc, char** argv, Command& command) {
  if (argc < 2) {
    return "missing command";
  }
  command.mode = argv[1];
  if (command.mode != "run" && command.mode != "compare") {
    return "unknown command '" + command.mode + "'";
  }
  std::string name = "run";
  std::string target;
  for (int index = 2; index < argc; ++index) {
    const std::string flag = argv[index];
    if (index + 1 >= argc) {
      return flag + " needs a value";
    }
    const std::string value = argv[++index];
    bool good = true;
    if (flag == "--target") {
      target = value;
    } else if (flag == "--run") {
      auto equals = value.find('=');
      if (equals == std::string::npos || equals == 0) {
        return "--run takes NAME=URL";
      }
      command.runs.emplace_back(value.substr(0, equals), value.substr(equals + 1));
    } else if (flag == "--workload") {
      command.workload = value;
    } else if (flag == "--out") {
      command.out = value;
    } else if (flag == "--reset") {
      command.resets.push_back(value);
    } else if (flag == "--name") {
      name = value;
    } else if (flag == "--model") {
      command.run_options.model = value;
    } else if (flag == "--sessions") {
      good = read_number(value, command.workload_options.sessions);
    } else if (flag == "--concurrency") {
      good = read_number(value, command.run_options.concurrency) && command.run_options.concurrency > 0;
    } else if (flag == "--duration") {
      good = read_number(value, command.run_options.duration_seconds) && command.run_options.duration_seconds >= 0;
    } else if (flag == "--seed") {
      good = read_number(value, command.workload_options.seed);
    } else if (flag == "--max-requests") {
      good = read_number(value, command.workload_options.max_requests);
    } else if (flag == "--time-scale") {
      good = read_number(value, command.workload_options.time_scale) && command.workload_options.time_scale > 0;
    } else if (flag == "--max-think-ms") {
      good = read_number(value, command.workload_options.max_think_ms);
    } else if (flag == "--trace-block-tokens") {
      good = read_number(value, command.workload_options.trace_block_tokens) &&
             command.workload_options.trace_block_tokens > 0;
    } else {
      return "unknown flag " + flag;
    }
    if (!good) {
      return "invalid value for " + flag + ": '" + value + "'";
    }
  }
  if (command.mode == "run") {
    if (target.empty() || !command.runs.empty()) {
      return "run takes one --target URL";
    }
    command.runs.emplace_back(name, target);
  } else if (command.runs.empty() || !target.empty()) {
    return "compare takes --run NAME=URL (one or more), not --target";
  }
  if (command.workload.empty() || command.out.empty()) {
    return "--workload and --out are required";
  }
  return "";
}

// A workload file, plain or gzip-compressed (gzread passes plain files
// through unchanged).
std::optional<std::string> read_workload_file(const std::string& path) {
  gzFile file = gzopen(path.c_str(), "rb");
  if (file == nullptr) {
    return std::nullopt;
  }
  std::string text;
  std::array<char, 1 << 16> buffer{};
  int read = 0;
  while ((read = gzread(file, buffer.data(), static_cast<unsigned>(buffer.size()))) > 0) {
    text.append(buffer.data(), static_cast<std::size_t>(read));
  }
  const bool failed = read < 0;
  gzclose(file);
  if (failed || (text.empty() && !std::filesystem::is_regular_file(path))) {
    return std::nullopt;
  }
  return text;
}

kvgate::Result<kvgate::load::Workload, std::string> load(const Command& command) {
  for (auto preset : kvgate::load::preset_names()) {
    if (command.workload == preset) {
      return kvgate::load::make_preset(preset, command.workload_options);
    }
  }
  auto text = read_workload_file(command.workload);
  if (!text) {
    return kvgate::unexpected("cannot read workload '" + command.workload + "' (not a file, not a preset)");
  }
  auto workload = kvgate::load::parse_workload(*text, command.workload, command.workload_options);
  if (!workload) {
    return kvgate::unexpected(command.workload + ": " + workload.error());
  }
  return workload;
}

void write_file(const std::filesystem::path& path, const std::string& text) {
  std::ofstream file(path, std::ios::binary | std::ios::trunc);
  file << text;
  if (!file) {
    throw std::runtime_error("cannot write " + path.string());
  }
}

}  // namespace

int main(int argc, char** argv) {
  Command command;
  if (auto problem = parse(argc, argv, command); !problem.empty()) {
    std::cerr << "kvgate-bench: " << problem << "\n" << kUsage;
    return 2;
  }
  auto workload = load(command);
  if (!workload) {
    std::cerr << "kvgate-bench: " << workload.error() << "\n";
    return 2;
  }
  try {
    std::filesystem::create_directories(command.out);
    std::vector<json> summaries;
    for (const auto& [name, target] : command.runs) {
      if (!command.resets.empty()) {
        if (auto failed = kvgate::load::reset_prefix_caches(command.resets)) {
          std::cerr << "kvgate-bench: " << *failed << "\n";
          return 1;
        }
      }
      auto options = command.run_options;
      options.target = target;
      std::cerr << "kvgate-bench: " << name << ": " << workload->name << " against " << target << "\n";
      auto result = kvgate::load::run_workload(*workload, options);
      if (!result) {
        std::cerr << "kvgate-bench: " << name << ": " << result.error() << "\n";
        return 1;
      }
      summaries.push_back(
          kvgate::load::summarize({name, target, workload->name, result->wall_seconds}, result->records));
      std::string records;
      for (const auto& record : result->records) {
        records += json{{"session", record.session},
                        {"turn", record.turn + 1},
                        {"status", record.status},
                        {"error", record.error},
                        {"worker", record.worker},
                        {"prompt_tokens", record.prompt_tokens},
                        {"cached_tokens", record.cached_tokens},
                        {"output_tokens", record.output_tokens},
                        {"ttft_ms", record.ttft_ms},
                        {"latency_ms", record.latency_ms}}
                       .dump() +
                   "\n";
      }
      write_file(std::filesystem::path(command.out) / ("records-" + name + ".jsonl"), records);
    }
    const json summary = command.mode == "run" ? summaries.front() : json{{"runs", summaries}};
    write_file(std::filesystem::path(command.out) / "summary.json", summary.dump(2) + "\n");
    const auto markdown = kvgate::load::markdown_report(summaries);
    write_file(std::filesystem::path(command.out) / "report.md", markdown);
    write_file(std::filesystem::path(command.out) / "report.html", kvgate::load::html_report(summaries));
    std::cout << markdown;
  } catch (const std::exception& error) {
    std::cerr << "kvgate-bench: " << error.what() << "\n";
    return 1;
  }
  return 0;
}
