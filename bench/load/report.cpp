#include "report.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <map>

namespace kvgate::load {
namespace {

using nlohmann::json;

double percentile(std::vector<double> values, double fraction) {
  if (values.empty()) {
    return 0;
  }
  std::sort(values.begin(), values.end());
  // Nearest rank.
  auto rank = static_cast<std::size_t>(std::ceil(fraction * static_cast<double>(values.size())));
  return values[std::clamp<std::size_t>(rank, 1, values.size()) - 1];
}

json distribution(const std::vector<double>& values) {
  double sum = 0;
  for (double value : values) {
    sum += value;
  }
  return {{"count", values.size()},
          {"mean", values.empty() ? 0.0 : sum / static_cast<double>(values.size())},
          {"p50", percentile(values, 0.5)},
          {"p90", percentile(values, 0.9)},
          {"p99", percentile(values, 0.99)}};
}

double ratio(std::uint64_t part, std::uint64_t whole) {
  return whole == 0 ? 0.0 : static_cast<double>(part) / static_cast<double>(whole);
}

struct Tokens {
  std::uint64_t requests = 0;
  std::uint64_t prompt = 0;
  std::uint64_t cached = 0;
};

std::string format(const char* pattern, double value) {
  std::array<char, 64> buffer{};
  std::snprintf(buffer.data(), buffer.size(), pattern, value);
  return buffer.data();
}

std::string percent(double value) {
  return format("%.1f%%", value * 100);
}

// Traces have no turns: "-" rather than a 0% nobody measured.
std::string later_turns(const json& distribution) {
  return distribution.value("count", 0) == 0 ? std::string("-") : percent(distribution.value("mean", 0.0));
}

}  // namespace

json summarize(const RunInfo& run, const std::vector<RequestRecord>& records) {
  Tokens total;
  std::map<std::uint32_t, Tokens> by_turn;
  std::map<std::size_t, Tokens> later_turns;  // per session, turns after the first
  std::map<std::string, std::uint64_t> by_worker;
  std::map<std::string, std::uint64_t> errors;
  std::vector<double> ttft;
  std::vector<double> latency;
  std::uint64_t output = 0;
  for (const auto& record : records) {
    if (!record.error.empty()) {
      ++errors[record.error];
      continue;
    }
    ++total.requests;
    total.prompt += record.prompt_tokens;
    total.cached += record.cached_tokens;
    output += record.output_tokens;
    auto& turn = by_turn[record.turn];
    ++turn.requests;
    turn.prompt += record.prompt_tokens;
    turn.cached += record.cached_tokens;
    if (record.turn > 0) {
      auto& session = later_turns[record.session];
      session.prompt += record.prompt_tokens;
      session.cached += record.cached_tokens;
    }
    if (!record.worker.empty()) {
      ++by_worker[record.worker];
    }
    if (record.ttft_ms >= 0) {
      ttft.push_back(record.ttft_ms);
    }
    latency.push_back(record.latency_ms);
  }
  json turns = json::array();
  for (const auto& [turn, tokens] : by_turn) {
    turns.push_back({{"turn", turn + 1},
                     {"requests", tokens.requests},
                     {"prompt_tokens", tokens.prompt},
                     {"cached_tokens", tokens.cached},
                     {"hit_rate", ratio(tokens.cached, tokens.prompt)}});
  }
  std::vector<double> session_rates;
  session_rates.reserve(later_turns.size());
  for (const auto& [session, tokens] : later_turns) {
    session_rates.push_back(ratio(tokens.cached, tokens.prompt));
  }
  std::uint64_t busiest = 0;
  for (const auto& [worker, count] : by_worker) {
    busiest = std::max(busiest, count);
  }
  const double mean_per_worker =
      by_worker.empty() ? 0.0 : static_cast<double>(total.requests) / static_cast<double>(by_worker.size());
  std::uint64_t error_count = 0;
  for (const auto& [kind, count] : errors) {
    error_count += count;
  }
  return {
      {"name", run.name},
      {"target", run.target},
      {"workload", run.workload},
      {"requests", total.requests + error_count},
      {"succeeded", total.requests},
      {"errors", error_count},
      {"error_kinds", errors},
      {"wall_seconds", run.wall_seconds},
      {"requests_per_second", run.wall_seconds > 0 ? static_cast<double>(total.requests) / run.wall_seconds : 0.0},
      {"prompt_tokens", total.prompt},
      {"cached_tokens", total.cached},
      {"output_tokens", output},
      {"hit_rate", ratio(total.cached, total.prompt)},
      {"hit_rate_by_turn", turns},
      // The mean over sessions of each one's hit rate after its first turn:
      // what keeping a conversation's turns together earns it.
      {"session_hit_rate_after_first_turn", distribution(session_rates)},
      {"ttft_ms", distribution(ttft)},
      {"latency_ms", distribution(latency)},
      {"requests_per_worker", by_worker},
      // The busiest worker's share over an even share: 1 is perfectly even.
      {"worker_imbalance", mean_per_worker > 0 ? static_cast<double>(busiest) / mean_per_worker : 0.0},
  };
}

std::string markdown_report(const std::vector<json>& runs) {
  std::string out = "# kvgate-bench report\n\n";
  if (runs.empty()) {
    return out;
  }
  out += "Workload `" + runs.front().value("workload", "") + "`.\n\n";
  out +=
      "| run | requests | errors | hit rate | session hit rate after turn 1 (mean) | TTFT p50 ms | TTFT p99 ms | "
      "latency p50 ms | req/s | worker imbalance |\n";
  out += "|---|---|---|---|---|---|---|---|---|---|\n";
  for (const auto& run : runs) {
    out += "| " + run.value("name", "") + " | " + std::to_string(run.value("requests", 0)) + " | " +
           std::to_string(run.value("errors", 0)) + " | " + percent(run.value("hit_rate", 0.0)) + " | " +
           later_turns(run["session_hit_rate_after_first_turn"]) + " | " +
           format("%.1f", run["ttft_ms"].value("p50", 0.0)) + " | " + format("%.1f", run["ttft_ms"].value("p99", 0.0)) +
           " | " + format("%.1f", run["latency_ms"].value("p50", 0.0)) + " | " +
           format("%.1f", run.value("requests_per_second", 0.0)) + " | " +
           format("%.2f", run.value("worker_imbalance", 0.0)) + " |\n";
  }
  if (runs.size() > 1) {
    const auto& base = runs.front();
    out += "\nAgainst `" + base.value("name", "") + "` (ratio of this run to it, measured in the same invocation):\n\n";
    out += "| run | hit rate | TTFT p50 | TTFT p99 |\n|---|---|---|---|\n";
    auto relative = [](double value, double reference) {
      return reference > 0 ? format("%.2fx", value / reference) : std::string("n/a");
    };
    for (std::size_t index = 1; index < runs.size(); ++index) {
      const auto& run = runs[index];
      out += "| " + run.value("name", "") + " | " + relative(run.value("hit_rate", 0.0), base.value("hit_rate", 0.0)) +
             " | " + relative(run["ttft_ms"].value("p50", 0.0), base["ttft_ms"].value("p50", 0.0)) + " | " +
             relative(run["ttft_ms"].value("p99", 0.0), base["ttft_ms"].value("p99", 0.0)) + " |\n";
    }
  }
  out += "\n## Prefix-cache hit rate by turn\n\n| turn |";
  std::size_t turns = 0;
  for (const auto& run : runs) {
    out += " " + run.value("name", "") + " |";
    turns = std::max(turns, run["hit_rate_by_turn"].size());
  }
  out += "\n|---|";
  for (std::size_t run = 0; run < runs.size(); ++run) {
    out += "---|";
  }
  out += "\n";
  for (std::size_t turn = 0; turn < turns; ++turn) {
    out += "| " + std::to_string(turn + 1) + " |";
    for (const auto& run : runs) {
      const auto& by_turn = run["hit_rate_by_turn"];
      out += " " + (turn < by_turn.size() ? percent(by_turn[turn].value("hit_rate", 0.0)) : std::string("-")) + " |";
    }
    out += "\n";
  }
  return out;
}

}  // namespace kvgate::load
