// kvgate-bench: drives a workload (sessions or a trace) against a target
// and reports the prefix-cache hit rate per turn, time to first token and
// load balance; `compare` runs the identical workload against several
// targets (for example kvgate under different policies), resetting the
// replicas' caches before each, and reports them side by side.
#include <sys/resource.h>
#include <zlib.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

#include "capacity.hpp"
#include "dial.hpp"
#include "report.hpp"
#include "runner.hpp"
#include "workload.hpp"

namespace {

using kvgate::load::RunOptions;
using kvgate::load::Workload;
using kvgate::load::WorkloadOptions;
using nlohmann::json;

constexpr const char* kUsage =
    "usage: kvgate-bench run --target URL[+URL...] --workload FILE[,FILE...]|PRESET --out DIR [options]\n"
    "       kvgate-bench compare --run NAME=URL [--run NAME=URL ...] --workload FILE|PRESET --out DIR [options]\n"
    "  (URL+URL+...: several gateways in front of the same replicas, taking requests in turn;\n"
    "   URL|URL|...: taking sessions in turn, each session keeping its gateway)\n"
    "       kvgate-bench report --from SUMMARY.json --out DIR   (the reports again, from a compare's summary)\n"
    "       kvgate-bench capacity --run NAME=URL [...] --workload FILE|PRESET --out DIR --slo-p90-ttft-ms X "
    "--reset URL [...] [options]\n"
    "       kvgate-bench ceiling --workload FILE|PRESET [options]   (what the workload offers: prompt tokens,\n"
    "                          the reuse ceiling, round robin's share over --replicas caches that never evict)\n"
    "       kvgate-bench trajectory FILE --run NAME=URL [...] --out DIR [--session ID] [--replica ID=URL ...]\n"
    "                          [--reset URL ...] [options]\n"
    "  (one session turn by turn through each target: with its session key, without, and with its second\n"
    "   turn sent straight to a --replica that never saw the first; FILE: session JSON lines, WEKA's\n"
    "   recorded sessions or a GET /debug/sessions/<key> export)\n"
    "options:\n"
    "  --sessions N            sessions of a preset, or the first N of the files (default: preset's / all)\n"
    "  --concurrency N         sessions in flight at once (default 8; traces run open loop)\n"
    "  --duration S            stop starting requests after S seconds (default: the whole workload)\n"
    "  --seed N                preset generator seed (default 1)\n"
    "  --model NAME            model to request (default: the target's first in /v1/models)\n"
    "  --request-fields JSON   a JSON object whose fields every request body carries besides its own (e.g. a\n"
    "                          logit_bias; bench/load/llama_fleet.sh's for the random-weights model)\n"
    "  --reset URL             replica whose prefix cache is reset before each run (repeatable)\n"
    "  --reset-command CMD     a shell command run before each run that must leave the replicas cold (e.g.\n"
    "                          restarting llama-server replicas, whose RAM cache no request empties)\n"
    "  --name NAME             run: the run's name in the report (default: run)\n"
    "  --session-prefix P      run: P prepended to every session key (a warm-up's sessions are then not the\n"
    "                          measured run's to a gateway that served both)\n"
    "  --max-requests N        traces: the first N requests\n"
    "  --time-scale X          traces: arrival and think times divided by X (default 1)\n"
    "  --max-think-ms N        recorded sessions: cap each (scaled) think time at N ms\n"
    "  --max-turns N           recorded sessions: their first N requests only\n"
    "  --adapters N            sessions spread over LoRA adapters adapter-0 .. adapter-(N-1) as \"model\"\n"
    "  --adapter-zipf S        adapter i's share of sessions ~ 1/(i+1)^S (default 1)\n"
    "  --subagents MODE        recorded sessions: flatten (default: sub-agents' requests in order) or parallel\n"
    "                          (consecutive sub-agents run at once with the session's key; the session waits)\n"
    "  --trace-block-tokens N  traces: tokens per hash id (default: the trace's own, Mooncake 512, WEKA 64)\n"
    "  --output-scale X        traces: output lengths divided by X (at least 1 token)\n"
    "  --strict                refuse a workload file with a malformed line (default: skip it and say so)\n"
    "  --load F                offered load, round robin's prefill utilisation (0.7: 70%): sessions start as a\n"
    "                          Poisson process (seeded), a trace's arrivals are sped up to match\n"
    "  --prefill-tokens-per-s R  the fleet's prefill capacity (all replicas; default: read from the --reset\n"
    "                          replicas' /metrics, kvgate_sim_prefill_tokens_per_second)\n"
    "  --replicas N            replicas behind the targets (default: the number of --reset URLs)\n"
    "  --block-tokens N        the engines' KV block size, for the reuse ceiling (default 16)\n"
    "  --fleet TEXT            a description of the fleet, printed in the report\n"
    "  --baseline NAME         a run the others are compared with (repeatable; default: the first run)\n"
    "  --unavailable NAME=WHY  compare, capacity: a target that could not be started (a peer that failed to\n"
    "                          start or is not installed), named in the report with WHY instead of figures\n"
    "  --slo-p90-ttft-ms X     capacity: the SLO, p90 time to first token in ms\n"
    "  --start-load F          capacity: the first step's load (default 0.5)\n"
    "  --max-steps N           capacity: runs per target (default 7)\n"
    "  --session ID            trajectory: the session of FILE to follow (default: the first)\n"
    "  --replica ID=URL        trajectory: a replica by the name it answers as (repeatable): its KV usage is\n"
    "                          read before each turn; the cold second turn goes to one of them\n"
    "presets: chat, agent, tools\n";

struct Command {
  std::string mode;
  std::vector<std::pair<std::string, std::string>> runs;         // name, target
  std::vector<std::pair<std::string, std::string>> unavailable;  // name, why it did not start
  std::string workload;
  std::string out;
  std::vector<std::string> resets;
  std::string reset_command;
  WorkloadOptions workload_options;
  RunOptions run_options;
  double load = 0;  // 0: no dial (closed-loop sessions, the trace's own times)
  double prefill_tokens_per_s = 0;
  std::uint32_t replicas = 0;
  std::uint32_t block_tokens = 16;
  std::string fleet;
  std::vector<std::string> baselines;
  double slo_p90_ttft_ms = 0;
  double start_load = 0.5;
  std::uint32_t max_steps = 7;
  std::string from;                                                 // report: a compare's summary.json
  std::string session_id;                                           // trajectory
  std::vector<std::pair<std::string, std::string>> replicas_by_id;  // trajectory: id, URL
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
  if (command.mode != "run" && command.mode != "compare" && command.mode != "capacity" && command.mode != "report" &&
      command.mode != "trajectory" && command.mode != "ceiling") {
    return "unknown command '" + command.mode + "'";
  }
  std::string name = "run";
  std::string target;
  for (int index = 2; index < argc; ++index) {
    const std::string flag = argv[index];
    if (flag == "--strict") {
      command.workload_options.strict = true;
      continue;
    }
    if (command.mode == "trajectory" && !flag.starts_with("--") && command.workload.empty()) {
      command.workload = flag;  // trajectory FILE
      continue;
    }
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
    } else if (flag == "--unavailable") {
      auto equals = value.find('=');
      if (equals == std::string::npos || equals == 0) {
        return "--unavailable takes NAME=WHY";
      }
      command.unavailable.emplace_back(value.substr(0, equals), value.substr(equals + 1));
    } else if (flag == "--replica") {
      auto equals = value.find('=');
      if (equals == std::string::npos || equals == 0) {
        return "--replica takes ID=URL";
      }
      command.replicas_by_id.emplace_back(value.substr(0, equals), value.substr(equals + 1));
    } else if (flag == "--session") {
      command.session_id = value;
    } else if (flag == "--from") {
      command.from = value;
    } else if (flag == "--workload") {
      command.workload = value;
    } else if (flag == "--out") {
      command.out = value;
    } else if (flag == "--reset") {
      command.resets.push_back(value);
    } else if (flag == "--reset-command") {
      command.reset_command = value;
    } else if (flag == "--name") {
      name = value;
    } else if (flag == "--model") {
      command.run_options.model = value;
    } else if (flag == "--session-prefix") {
      command.run_options.session_prefix = value;
    } else if (flag == "--request-fields") {
      command.run_options.request_fields = json::parse(value, nullptr, /*allow_exceptions=*/false);
      good = command.run_options.request_fields.is_object();
    } else if (flag == "--adapters") {
      good = read_number(value, command.workload_options.adapters) && command.workload_options.adapters <= 256;
    } else if (flag == "--adapter-zipf") {
      good = read_number(value, command.workload_options.adapter_zipf) && command.workload_options.adapter_zipf >= 0;
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
    } else if (flag == "--output-scale") {
      good = read_number(value, command.workload_options.output_scale) && command.workload_options.output_scale > 0;
    } else if (flag == "--max-think-ms") {
      good = read_number(value, command.workload_options.max_think_ms);
    } else if (flag == "--subagents") {
      good = value == "flatten" || value == "parallel";
      command.workload_options.parallel_subagents = value == "parallel";
    } else if (flag == "--max-turns") {
      good = read_number(value, command.workload_options.max_turns);
    } else if (flag == "--trace-block-tokens") {
      good = read_number(value, command.workload_options.trace_block_tokens) &&
             command.workload_options.trace_block_tokens > 0;
    } else if (flag == "--load") {
      good = read_number(value, command.load) && command.load > 0 && command.load <= 2;
    } else if (flag == "--prefill-tokens-per-s") {
      good = read_number(value, command.prefill_tokens_per_s) && command.prefill_tokens_per_s > 0;
    } else if (flag == "--replicas") {
      good = read_number(value, command.replicas) && command.replicas > 0;
    } else if (flag == "--block-tokens") {
      good = read_number(value, command.block_tokens) && command.block_tokens > 0;
    } else if (flag == "--fleet") {
      command.fleet = value;
    } else if (flag == "--baseline") {
      command.baselines.push_back(value);
    } else if (flag == "--slo-p90-ttft-ms") {
      good = read_number(value, command.slo_p90_ttft_ms) && command.slo_p90_ttft_ms > 0;
    } else if (flag == "--start-load") {
      good = read_number(value, command.start_load) && command.start_load > 0;
    } else if (flag == "--max-steps") {
      good = read_number(value, command.max_steps) && command.max_steps > 0;
    } else {
      return "unknown flag " + flag;
    }
    if (!good) {
      return "invalid value for " + flag + ": '" + value + "'";
    }
  }
  if (command.mode == "report") {
    if (command.from.empty() || command.out.empty()) {
      return "report takes --from SUMMARY.json and --out DIR";
    }
    return "";
  }
  if (command.mode == "ceiling") {
    return command.workload.empty() ? "ceiling takes --workload" : "";
  }
  if (command.mode == "run") {
    if (target.empty() || !command.runs.empty()) {
      return "run takes one --target URL";
    }
    command.runs.emplace_back(name, target);
  } else if (command.runs.empty() || !target.empty()) {
    return command.mode + " takes --run NAME=URL (one or more), not --target";
  }
  if (!command.unavailable.empty() && command.mode != "compare" && command.mode != "capacity") {
    return "--unavailable goes with compare or capacity";
  }
  if (command.mode == "capacity") {
    if (command.slo_p90_ttft_ms <= 0) {
      return "capacity needs --slo-p90-ttft-ms";
    }
    if (command.resets.empty()) {
      return "capacity needs --reset URL for each replica (each step starts from cold caches)";
    }
    if (command.load > 0) {
      return "capacity chooses the load itself; use --start-load for its first step";
    }
  }
  for (const auto& baseline : command.baselines) {
    // A baseline that did not start is named in the report like any target.
    auto named = [&](const auto& run) { return run.first == baseline; };
    if (std::none_of(command.runs.begin(), command.runs.end(), named) &&
        std::none_of(command.unavailable.begin(), command.unavailable.end(), named)) {
      return "--baseline " + baseline + " names no --run";
    }
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

kvgate::Result<kvgate::load::Workload, std::string> load_sessions_or_trace(const Command& command) {
  for (auto preset : kvgate::load::preset_names()) {
    if (command.workload == preset) {
      return kvgate::load::make_preset(preset, command.workload_options);
    }
  }
  // Several files (comma-separated, one format): one workload, in order,
  // e.g. the shards of a trace. --sessions and --max-requests count the whole.
  kvgate::load::Workload combined;
  combined.name = command.workload;
  std::string_view files = command.workload;
  while (!files.empty()) {
    const auto comma = files.find(',');
    const std::string file(files.substr(0, comma));
    files = comma == std::string_view::npos ? std::string_view() : files.substr(comma + 1);
    auto text = read_workload_file(file);
    if (!text) {
      return kvgate::unexpected("cannot read workload '" + file + "' (not a file, not a preset)");
    }
    auto options = command.workload_options;
    if (options.sessions != 0) {
      options.sessions -= static_cast<std::uint32_t>(std::min<std::size_t>(options.sessions, combined.sessions.size()));
      if (options.sessions == 0) {
        break;
      }
    }
    if (options.max_requests != 0) {
      options.max_requests -=
          static_cast<std::uint32_t>(std::min<std::size_t>(options.max_requests, combined.trace.size()));
      if (options.max_requests == 0) {
        break;
      }
    }
    auto workload = kvgate::load::parse_workload(*text, file, options);
    if (!workload) {
      return kvgate::unexpected(file + ": " + workload.error());
    }
    for (auto& skipped : workload->skipped) {
      combined.skipped.push_back(file + ": " + skipped);
    }
    std::move(workload->sessions.begin(), workload->sessions.end(), std::back_inserter(combined.sessions));
    std::move(workload->trace.begin(), workload->trace.end(), std::back_inserter(combined.trace));
  }
  if (!combined.sessions.empty() && !combined.trace.empty()) {
    return kvgate::unexpected(std::string("the workload files mix sessions and a trace"));
  }
  return combined;
}

kvgate::Result<kvgate::load::Workload, std::string> load(const Command& command) {
  auto workload = load_sessions_or_trace(command);
  if (workload && command.workload_options.adapters > 0) {
    if (workload->sessions.empty()) {
      return kvgate::unexpected(std::string("--adapters needs a session workload"));
    }
    kvgate::load::assign_adapters(*workload, command.workload_options.adapters, command.workload_options.adapter_zipf,
                                  command.workload_options.seed);
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

// The fleet's prefill capacity in tokens per real second: the flag, else
// the replicas' own figure.
kvgate::Result<double, std::string> fleet_capacity(const Command& command) {
  if (command.prefill_tokens_per_s > 0) {
    return command.prefill_tokens_per_s;
  }
  if (command.resets.empty()) {
    return kvgate::unexpected(std::string("--load needs --prefill-tokens-per-s or the replicas (--reset URL)"));
  }
  auto metrics = kvgate::load::scrape_replicas(command.resets);
  if (!metrics) {
    return kvgate::unexpected("reading the replicas' prefill rate: " + metrics.error());
  }
  double total = 0;
  for (const auto& replica : *metrics) {
    if (!replica.prefill_tokens_per_s) {
      return kvgate::unexpected(
          std::string("a replica does not export kvgate_sim_prefill_tokens_per_second; give --prefill-tokens-per-s"));
    }
    total += *replica.prefill_tokens_per_s;
  }
  return total;
}

// The workload and options of one run at `load`, and what the dial set.
struct Dialled {
  Workload workload;
  RunOptions options;
  json dial;
};

Dialled dial_to(const Command& command, const Workload& base, const kvgate::load::OfferedTokens& offered,
                double fleet_tokens_per_s, double load) {
  Dialled out{base, command.run_options, json::object()};
  out.dial = {{"load", load},
              {"offered_requests", offered.requests},
              {"fleet_prefill_tokens_per_s", fleet_tokens_per_s},
              {"offered_prompt_tokens", offered.prompt},
              {"offered_round_robin_tokens", offered.round_robin}};
  if (!base.sessions.empty()) {
    const double rate = kvgate::load::session_rate_for_load(offered, base.sessions.size(), load, fleet_tokens_per_s);
    out.options.session_starts_ms =
        kvgate::load::poisson_starts_ms(base.sessions.size(), rate, command.workload_options.seed);
    out.dial["sessions_per_minute"] = rate * 60;
  } else {
    const double speedup = kvgate::load::trace_speedup_for_load(offered, load, fleet_tokens_per_s);
    for (auto& request : out.workload.trace) {
      request.arrival_ms /= speedup;
    }
    out.dial["trace_speedup"] = speedup * command.workload_options.time_scale;
    out.dial["requests_per_second"] =
        static_cast<double>(base.trace.size()) / std::max(offered.trace_span_ms / speedup / 1000, 1e-9);
  }
  return out;
}

// CPU seconds (user + system) this process has used.
double cpu_seconds() {
  rusage usage{};
  ::getrusage(RUSAGE_SELF, &usage);
  auto seconds = [](const timeval& value) { return static_cast<double>(value.tv_sec) + value.tv_usec / 1e6; };
  return seconds(usage.ru_utime) + seconds(usage.ru_stime);
}

// One run from reset caches; its summary (with the replicas' measured load)
// and records file. A target that cannot be reached is a failed run, not
// the end of the comparison.
// Resets the replicas before a run: the command, then the endpoints.
void reset_replicas(const Command& command) {
  if (!command.reset_command.empty()) {
    // A benchmark's own shell command (the script that passed it), not input.
    if (const int status = std::system(command.reset_command.c_str()); status != 0) {
      throw std::runtime_error("--reset-command failed (status " + std::to_string(status) + ")");
    }
  }
  if (!command.resets.empty()) {
    if (auto failed = kvgate::load::reset_prefix_caches(command.resets)) {
      throw std::runtime_error(*failed);
    }
  }
}

json run_one(const Command& command, const std::string& name, const std::string& target, const Workload& workload,
             RunOptions options, const json& dial, const std::string& records_name) {
  reset_replicas(command);
  options.target = target;
  std::cerr << "kvgate-bench: " << name << ": " << workload.name << " against " << target << "\n";
  std::optional<std::vector<kvgate::load::ReplicaMetrics>> before;
  if (!command.resets.empty()) {
    if (auto scraped = kvgate::load::scrape_replicas(command.resets)) {
      before = std::move(*scraped);
    }
  }
  // Over the arrival window too: a burst of long sessions ramps up and
  // drains, and the whole run's average understates the load while they
  // arrive.
  std::optional<kvgate::load::FleetLoad> while_arriving;
  if (before) {
    options.on_last_arrival = [&](double seconds) {
      if (auto now = kvgate::load::scrape_replicas(command.resets)) {
        while_arriving = kvgate::load::fleet_load(*before, *now, seconds);
      }
    };
  }
  const double cpu_before = cpu_seconds();
  auto result = kvgate::load::run_workload(workload, options);
  const double bench_cpu = cpu_seconds() - cpu_before;
  if (!result) {
    std::cerr << "kvgate-bench: " << name << ": " << result.error() << "\n";
    json failed = kvgate::load::summarize({name, target, workload.name, 0}, {});
    failed["failure"] = result.error();
    return failed;
  }
  auto summary = kvgate::load::summarize({name, target, workload.name, result->wall_seconds}, result->records);
  if (!dial.empty()) {
    summary["dial"] = dial;
  }
  // The driver's own CPU share of one core: near 1 would make it the
  // bottleneck rather than the target.
  summary["bench_cpu_share"] = result->wall_seconds > 0 ? bench_cpu / result->wall_seconds : 0.0;
  if (before) {
    if (auto after = kvgate::load::scrape_replicas(command.resets)) {
      auto load = kvgate::load::fleet_load(*before, *after, result->wall_seconds);
      if (load.measured) {
        summary["measured_prefill_utilisation"] = load.prefill_utilisation;
        summary["measured_busy_fraction"] = load.busy_fraction;
      }
      if (while_arriving && while_arriving->measured) {
        summary["measured_prefill_utilisation_while_arriving"] = while_arriving->prefill_utilisation;
      }
      // Replicas serving LoRA adapters (kvgate-sim --lora-adapters) count
      // their adapter loads: how often a placement made one load.
      double loads = 0;
      bool counted = after->size() == before->size();
      for (std::size_t index = 0; counted && index < after->size(); ++index) {
        counted = (*after)[index].lora_loads && (*before)[index].lora_loads;
        loads += counted ? *(*after)[index].lora_loads - *(*before)[index].lora_loads : 0;
      }
      if (counted && !result->records.empty()) {
        summary["adapter_loads_per_1000_requests"] = 1000.0 * loads / static_cast<double>(result->records.size());
      }
      // What the replicas computed and moved, whichever of them did it: a
      // disaggregated decoder's usage counts received KV as cached, so the
      // prefill work is the replicas' own count.
      auto delta = [&](std::optional<double> kvgate::load::ReplicaMetrics::*field) -> std::optional<double> {
        double total = 0;
        bool any = false;
        for (std::size_t index = 0; index < after->size() && index < before->size(); ++index) {
          if ((*after)[index].*field && (*before)[index].*field) {
            total += *((*after)[index].*field) - *((*before)[index].*field);
            any = true;
          }
        }
        return any ? std::optional(total) : std::nullopt;
      };
      if (auto computed = delta(&kvgate::load::ReplicaMetrics::computed_prompt_tokens)) {
        summary["replica_prefill_tokens_computed"] = *computed;
      }
      // Per replica (in --reset order): what each computed, found in its own
      // cache and received, so a report can group them into pools.
      json replicas = json::array();
      for (std::size_t index = 0; index < after->size() && index < before->size(); ++index) {
        auto one = [&](std::optional<double> kvgate::load::ReplicaMetrics::*field) {
          const auto& start = (*before)[index].*field;
          const auto& end = (*after)[index].*field;
          return start && end ? json(*end - *start) : json(nullptr);
        };
        replicas.push_back({{"replica", command.resets[index]},
                            {"prompt_tokens", one(&kvgate::load::ReplicaMetrics::prompt_tokens)},
                            {"prefix_hit_tokens", one(&kvgate::load::ReplicaMetrics::prefix_hit_tokens)},
                            {"computed_prompt_tokens", one(&kvgate::load::ReplicaMetrics::computed_prompt_tokens)},
                            {"kv_transfers", one(&kvgate::load::ReplicaMetrics::kv_transfers)}});
      }
      summary["replica_work"] = std::move(replicas);
      auto transfers = delta(&kvgate::load::ReplicaMetrics::kv_transfers);
      auto transfer_seconds = delta(&kvgate::load::ReplicaMetrics::kv_transfer_seconds);
      if (transfers && transfer_seconds) {
        summary["kv_transfers"] = *transfers;
        summary["kv_transfer_ms_mean"] = *transfers > 0 ? 1000 * *transfer_seconds / *transfers : 0.0;
      }
    }
  }
  std::string records;
  for (const auto& record : result->records) {
    records += json{{"session", record.session},
                    {"turn", record.turn + 1},
                    {"status", record.status},
                    {"error", record.error},
                    {"worker", record.worker},
                    {"prompt_tokens", record.prompt_tokens},
                    {"cached_tokens", record.cached_tokens},
                    {"ceiling_tokens", record.ceiling_tokens},
                    {"output_tokens", record.output_tokens},
                    {"sent_ms", record.sent_ms},
                    {"ttft_ms", record.ttft_ms},
                    {"latency_ms", record.latency_ms}}
                   .dump() +
               "\n";
  }
  write_file(std::filesystem::path(command.out) / ("records-" + records_name + ".jsonl"), records);
  return summary;
}

// An SLO step holds when every request was answered and p90 TTFT is within it.
bool slo_held(const json& summary, double slo_p90_ttft_ms) {
  return !summary.contains("failure") && summary.value("errors", 0) == 0 && summary.value("succeeded", 0) > 0 &&
         summary["ttft_ms"].value("p90", 0.0) <= slo_p90_ttft_ms;
}

int run_capacity(const Command& command, const Workload& workload, const kvgate::load::OfferedTokens& offered,
                 double fleet_tokens_per_s, const json& meta) {
  json targets = json::array();
  for (const auto& [name, target] : command.runs) {
    kvgate::load::CapacitySearch search(command.start_load, command.max_steps);
    json steps = json::array();
    while (auto load = search.next()) {
      auto dialled = dial_to(command, workload, offered, fleet_tokens_per_s, *load);
      char step_name[64];
      std::snprintf(step_name, sizeof step_name, "%s-load%.3f", name.c_str(), *load);
      auto summary = run_one(command, name, target, dialled.workload, dialled.options, dialled.dial, step_name);
      const bool held = slo_held(summary, command.slo_p90_ttft_ms);
      search.record(*load, held);
      steps.push_back({{"load", *load},
                       {"dial", dialled.dial},
                       {"held", held},
                       {"ttft_p90_ms", summary["ttft_ms"].value("p90", 0.0)},
                       {"errors", summary.value("errors", 0)},
                       {"hit_rate", summary.value("hit_rate", 0.0)},
                       {"measured_prefill_utilisation", summary.value("measured_prefill_utilisation", json())}});
      std::cerr << "kvgate-bench: " << name << ": load " << *load << " p90 TTFT "
                << summary["ttft_ms"].value("p90", 0.0) << " ms: " << (held ? "held" : "missed") << "\n";
    }
    json capacity_dial = nullptr;
    if (search.capacity() > 0) {
      capacity_dial = dial_to(command, workload, offered, fleet_tokens_per_s, search.capacity()).dial;
    }
    targets.push_back({{"name", name},
                       {"target", target},
                       {"capacity_load", search.capacity()},
                       {"capacity", capacity_dial},
                       {"steps", steps}});
  }
  for (const auto& [name, why] : command.unavailable) {
    targets.push_back({{"name", name}, {"failure", "did not start: " + why}, {"steps", json::array()}});
  }
  const json capacity = {
      {"workload", workload.name}, {"slo_p90_ttft_ms", command.slo_p90_ttft_ms}, {"meta", meta}, {"targets", targets}};
  write_file(std::filesystem::path(command.out) / "capacity.json", capacity.dump(2) + "\n");
  const auto markdown = kvgate::load::capacity_markdown(capacity);
  write_file(std::filesystem::path(command.out) / "report.md", markdown);
  write_file(std::filesystem::path(command.out) / "report.html", kvgate::load::capacity_html(capacity));
  std::cout << markdown;
  return 0;
}

}  // namespace

// One trajectory through every target, three ways each, from reset caches.
int run_trajectories(const Command& command) {
  auto text = read_workload_file(command.workload);
  if (!text) {
    std::cerr << "kvgate-bench: cannot read trajectory '" << command.workload << "'\n";
    return 2;
  }
  auto session = kvgate::load::parse_trajectory(*text, command.session_id, command.workload_options);
  if (!session) {
    std::cerr << "kvgate-bench: " << command.workload << ": " << session.error() << "\n";
    return 2;
  }
  std::filesystem::create_directories(command.out);
  std::vector<kvgate::load::TrajectoryRun> runs;
  for (const auto& [name, target] : command.runs) {
    std::string model = command.run_options.model;
    if (model.empty()) {
      auto found = kvgate::load::first_model(target);
      if (!found) {
        std::cerr << "kvgate-bench: " << name << ": " << found.error() << "\n";
        return 1;
      }
      model = *found;
    }
    for (auto mode : kvgate::load::kTrajectoryModes) {
      reset_replicas(command);
      kvgate::load::TrajectoryOptions options{target, model, mode, {}, command.replicas_by_id};
      // A key of its own per run: no run finds another's session.
      options.session_key = "trajectory-" + session->id + "-" + name + "-" + std::string(to_string(mode));
      for (char& c : options.session_key) {
        c = std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '-' || c == '.' ? c : '_';  // a header value
      }
      auto run = kvgate::load::run_trajectory(*session, options);
      if (!run) {
        std::cerr << "kvgate-bench: " << name << ": " << run.error() << "\n";
        return 1;
      }
      run->target = name;
      std::cerr << "kvgate-bench: " << name << " " << to_string(mode) << ": " << run->turns.size() << " turns\n";
      runs.push_back(std::move(*run));
    }
  }
  const json meta = {{"workload", command.workload}, {"fleet", command.fleet}};
  const auto trajectory = kvgate::load::trajectory_json(session->id, runs, meta);
  write_file(std::filesystem::path(command.out) / "trajectory.json", trajectory.dump(2) + "\n");
  const auto markdown = kvgate::load::trajectory_markdown(trajectory);
  write_file(std::filesystem::path(command.out) / "report.md", markdown);
  write_file(std::filesystem::path(command.out) / "report.html", kvgate::load::trajectory_html(trajectory));
  std::cout << markdown;
  return 0;
}

// The Markdown and HTML reports again from a compare's summary.json, e.g.
// after the report's layout changed, without running anything.
int rerender(const Command& command) {
  std::ifstream file(command.from);
  auto summary = json::parse(file, nullptr, false);
  if (!file.is_open() || summary.is_discarded() || !summary.is_object() || !summary.contains("runs") ||
      !summary["runs"].is_array()) {
    std::cerr << "kvgate-bench: " << command.from << " is not a compare's summary.json\n";
    return 2;
  }
  const std::vector<json> runs(summary["runs"].begin(), summary["runs"].end());
  const auto& meta = kvgate::load::member(summary, "meta");
  std::filesystem::create_directories(command.out);
  write_file(std::filesystem::path(command.out) / "report.md", kvgate::load::markdown_report(runs, meta));
  write_file(std::filesystem::path(command.out) / "report.html", kvgate::load::html_report(runs, meta));
  return 0;
}

int main(int argc, char** argv) {
  Command command;
  if (auto problem = parse(argc, argv, command); !problem.empty()) {
    std::cerr << "kvgate-bench: " << problem << "\n" << kUsage;
    return 2;
  }
  if (command.mode == "trajectory") {
    try {
      return run_trajectories(command);
    } catch (const std::exception& error) {
      std::cerr << "kvgate-bench: " << error.what() << "\n";
      return 1;
    }
  }
  if (command.mode == "report") {
    try {
      return rerender(command);
    } catch (const std::exception& error) {
      std::cerr << "kvgate-bench: " << error.what() << "\n";
      return 1;
    }
  }
  auto workload = load(command);
  if (!workload) {
    std::cerr << "kvgate-bench: " << workload.error() << "\n";
    return 2;
  }
  for (const auto& skipped : workload->skipped) {
    std::cerr << "kvgate-bench: skipped " << skipped << "\n";
  }
  if (command.mode == "ceiling") {
    // No target: the figures a slice of a workload is compared with the
    // whole on, without running either.
    const auto replicas = std::max<std::uint32_t>(1, command.replicas);
    const auto offered = kvgate::load::offered_tokens(*workload, replicas, command.block_tokens);
    const json figures = {
        {"workload", command.workload},
        {"sessions", workload->sessions.size()},
        {"requests", offered.requests},
        {"prompt_tokens", offered.prompt},
        {"ceiling", offered.prompt > 0 ? offered.ceiling / offered.prompt : 0.0},
        {"replicas", replicas},
        {"round_robin_computed_share", offered.prompt > 0 ? offered.round_robin / offered.prompt : 0.0}};
    std::cout << figures.dump(2) << "\n";
    return 0;
  }
  try {
    std::filesystem::create_directories(command.out);
    const auto replicas = command.replicas > 0
                              ? command.replicas
                              : static_cast<std::uint32_t>(std::max<std::size_t>(1, command.resets.size()));
    const auto offered = kvgate::load::offered_tokens(*workload, replicas, command.block_tokens);
    json meta = {{"fleet", command.fleet},
                 {"replicas", replicas},
                 {"baselines", command.baselines},
                 {"skipped_lines", workload->skipped.size()},
                 {"workload_ceiling", offered.prompt > 0 ? offered.ceiling / offered.prompt : 0.0}};
    double fleet_tokens_per_s = 0;
    if (command.load > 0 || command.mode == "capacity") {
      auto capacity = fleet_capacity(command);
      if (!capacity) {
        std::cerr << "kvgate-bench: " << capacity.error() << "\n";
        return 2;
      }
      fleet_tokens_per_s = *capacity;
    }
    if (command.mode == "capacity") {
      return run_capacity(command, *workload, offered, fleet_tokens_per_s, meta);
    }
    Dialled dialled{*workload, command.run_options, json::object()};
    if (command.load > 0) {
      dialled = dial_to(command, *workload, offered, fleet_tokens_per_s, command.load);
      std::cerr << "kvgate-bench: load " << command.load << ": " << dialled.dial.dump() << "\n";
    }
    std::vector<json> summaries;
    for (const auto& [name, target] : command.runs) {
      summaries.push_back(run_one(command, name, target, dialled.workload, dialled.options, dialled.dial, name));
    }
    // Known before the run: named in the report, not a failure of this run.
    for (const auto& [name, why] : command.unavailable) {
      json absent = kvgate::load::summarize({name, "", dialled.workload.name, 0}, {});
      absent["failure"] = "did not start: " + why;
      absent["unavailable"] = true;
      summaries.push_back(std::move(absent));
    }
    const bool any_failed = std::any_of(summaries.begin(), summaries.end(), [](const json& run) {
      return run.contains("failure") && !run.value("unavailable", false);
    });
    const json summary = command.mode == "run" ? summaries.front() : json{{"runs", summaries}, {"meta", meta}};
    write_file(std::filesystem::path(command.out) / "summary.json", summary.dump(2) + "\n");
    const auto markdown = kvgate::load::markdown_report(summaries, meta);
    write_file(std::filesystem::path(command.out) / "report.md", markdown);
    write_file(std::filesystem::path(command.out) / "report.html", kvgate::load::html_report(summaries, meta));
    std::cout << markdown;
    if (any_failed) {
      return 1;  // the report is written, with the failed runs named in it
    }
  } catch (const std::exception& error) {
    std::cerr << "kvgate-bench: " << error.what() << "\n";
    return 1;
  }
  return 0;
}
