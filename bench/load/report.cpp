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

std::string repeat(std::string_view cell, std::size_t times) {
  std::string out;
  for (std::size_t index = 0; index < times; ++index) {
    out += cell;
  }
  return out;
}

// Traces have no turns: "-" rather than a 0% nobody measured.
std::string later_turns(const json& distribution) {
  return distribution.value("count", 0) == 0 ? std::string("-") : percent(distribution.value("mean", 0.0));
}

}  // namespace

const json& member(const json& object, const char* key) {
  static const json kAbsent;
  if (!object.is_object()) {
    return kAbsent;
  }
  auto found = object.find(key);
  return found == object.end() ? kAbsent : *found;
}

json summarize(const RunInfo& run, const std::vector<RequestRecord>& records) {
  Tokens total;
  std::map<std::uint32_t, Tokens> by_turn;
  std::map<std::size_t, Tokens> later_turns;  // per session, turns after the first
  std::map<std::string, std::uint64_t> by_worker;
  std::map<std::string, std::uint64_t> errors;
  // Sub-agents' requests, and those of forks that ran several at once.
  Tokens subagents;
  Tokens siblings;
  double subagent_ttft_sum = 0;
  double sibling_ttft_sum = 0;
  std::vector<double> ttft;
  std::vector<double> latency;
  std::vector<double> tpot;
  std::uint64_t remote_prefills = 0;
  std::uint64_t output = 0;
  // kvgate's predictions against the engine's figure (requests with a
  // receipt), and the full-attention group's alone.
  std::uint64_t predicted = 0;
  std::uint64_t predicted_exact = 0;
  std::uint64_t predicted_over = 0;
  std::uint64_t full_attention_exact = 0;
  std::uint64_t full_attention_over = 0;
  std::uint64_t ceiling = 0;
  double last_sent_ms = 0;
  for (const auto& record : records) {
    last_sent_ms = std::max(last_sent_ms, record.sent_ms);
  }
  // Requests sent per worker over the run: the hotspot picture.
  constexpr std::size_t kBins = 40;
  const double bin_ms = std::max(1.0, last_sent_ms / kBins + 1e-9);
  std::map<std::string, std::vector<std::uint64_t>> timeline;
  for (const auto& record : records) {
    if (!record.error.empty()) {
      ++errors[record.error];
      continue;
    }
    ++total.requests;
    ceiling += record.ceiling_tokens;
    remote_prefills += record.remote_prefill ? 1 : 0;
    // Time per output token after the first (the decode phase's pace).
    if (record.ttft_ms >= 0 && record.output_tokens > 1) {
      tpot.push_back((record.latency_ms - record.ttft_ms) / static_cast<double>(record.output_tokens - 1));
    }
    if (record.predicted_cached && !record.remote_prefill) {
      const auto full_only = record.full_attention_cached.value_or(*record.predicted_cached);
      ++predicted;
      predicted_exact += *record.predicted_cached == record.cached_tokens ? 1 : 0;
      predicted_over += *record.predicted_cached > record.cached_tokens ? 1 : 0;
      full_attention_exact += full_only == record.cached_tokens ? 1 : 0;
      full_attention_over += full_only > record.cached_tokens ? 1 : 0;
    }
    if (!record.worker.empty()) {
      auto& bins = timeline[record.worker];
      bins.resize(kBins);
      ++bins[std::min(kBins - 1, static_cast<std::size_t>(record.sent_ms / bin_ms))];
    }
    total.prompt += record.prompt_tokens;
    total.cached += record.cached_tokens;
    output += record.output_tokens;
    if (record.subagent > 0) {
      // Turns of their own: kept out of the session's turn figures.
      for (auto* tokens : {&subagents, record.fork_size >= 2 ? &siblings : nullptr}) {
        if (tokens != nullptr) {
          ++tokens->requests;
          tokens->prompt += record.prompt_tokens;
          tokens->cached += record.cached_tokens;
        }
      }
      subagent_ttft_sum += std::max(0.0, record.ttft_ms);
      sibling_ttft_sum += record.fork_size >= 2 ? std::max(0.0, record.ttft_ms) : 0.0;
    }
    if (record.subagent == 0) {
      auto& turn = by_turn[record.turn];
      ++turn.requests;
      turn.prompt += record.prompt_tokens;
      turn.cached += record.cached_tokens;
    }
    if (record.turn > 0 && record.subagent == 0) {
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
  // The TTFT distribution as 41 points (every 2.5%), for a CDF chart.
  json ttft_cdf = json::array();
  if (!ttft.empty()) {
    for (int step = 0; step <= 40; ++step) {
      ttft_cdf.push_back({percentile(ttft, std::max(step / 40.0, 1e-9)), step / 40.0});
    }
  }
  json subagent_figures = nullptr;
  if (subagents.requests > 0) {
    subagent_figures = {
        {"requests", subagents.requests},
        {"hit_rate", ratio(subagents.cached, subagents.prompt)},
        {"ttft_mean_ms", subagent_ttft_sum / static_cast<double>(subagents.requests)},
        {"sibling_requests", siblings.requests},
        {"sibling_hit_rate", ratio(siblings.cached, siblings.prompt)},
        {"sibling_ttft_mean_ms",
         siblings.requests > 0 ? json(sibling_ttft_sum / static_cast<double>(siblings.requests)) : json(nullptr)}};
  }
  return {
      {"name", run.name},
      {"target", run.target},
      {"subagents", std::move(subagent_figures)},
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
      {"ceiling_tokens", ceiling},
      {"ceiling", ratio(ceiling, total.prompt)},
      {"hit_over_ceiling", ratio(total.cached, ceiling)},
      {"prefill_tokens_computed", total.prompt - std::min(total.cached, total.prompt)},
      {"hit_rate_by_turn", turns},
      // The mean over sessions of each one's hit rate after its first turn:
      // what keeping a conversation's turns together earns it.
      {"session_hit_rate_after_first_turn", distribution(session_rates)},
      {"ttft_ms", distribution(ttft)},
      {"ttft_cdf", ttft_cdf},
      {"worker_timeline", {{"bin_ms", bin_ms}, {"workers", timeline}}},
      {"latency_ms", distribution(latency)},
      {"tpot_ms", distribution(tpot)},
      {"remote_prefill_share", ratio(remote_prefills, total.requests)},
      {"requests_per_worker", by_worker},
      {"predictions", predicted == 0 ? json()
                                     : json{{"requests", predicted},
                                            {"exact", predicted_exact},
                                            {"over", predicted_over},
                                            {"full_attention_exact", full_attention_exact},
                                            {"full_attention_over", full_attention_over}}},
      // The busiest worker's share over an even share: 1 is perfectly even.
      {"worker_imbalance", mean_per_worker > 0 ? static_cast<double>(busiest) / mean_per_worker : 0.0},
  };
}

std::vector<std::size_t> baseline_indexes(const std::vector<json>& runs, const json& meta) {
  std::vector<std::size_t> indexes;
  if (meta.is_object() && meta.contains("baselines")) {
    for (const auto& name : meta["baselines"]) {
      for (std::size_t index = 0; index < runs.size(); ++index) {
        if (runs[index].value("name", "") == name.get<std::string>()) {
          indexes.push_back(index);
        }
      }
    }
  }
  if (indexes.empty() && !runs.empty()) {
    indexes.push_back(0);
  }
  return indexes;
}

std::string markdown_report(const std::vector<json>& runs, const json& meta) {
  std::string out = "# kvgate-bench report\n\n";
  if (runs.empty()) {
    return out;
  }
  out += "Workload `" + runs.front().value("workload", "") + "`";
  if (meta.is_object() && meta.value("workload_ceiling", 0.0) > 0) {
    out += "; its reuse ceiling (prompt tokens whose prefix an earlier request sent) is about " +
           percent(meta.value("workload_ceiling", 0.0));
  }
  out += ".\n";
  if (meta.is_object() && !meta.value("fleet", "").empty()) {
    out += "Fleet: " + meta.value("fleet", "") + ".\n";
  }
  if (runs.front().contains("dial")) {
    const auto& dial = runs.front()["dial"];
    out += "Load dial: " + percent(dial.value("load", 0.0)) + " of the fleet's prefill capacity (" +
           format("%.0f", dial.value("fleet_prefill_tokens_per_s", 0.0)) + " tokens/s), ";
    out += dial.contains("sessions_per_minute")
               ? format("%.2f sessions/min (Poisson arrivals)", dial.value("sessions_per_minute", 0.0))
               : format("trace sped up %.2fx", dial.value("trace_speedup", 0.0));
    out += ".\n";
  }
  out += "\n";
  out +=
      "| run | requests | errors | hit rate | hit / ceiling | session hit rate after turn 1 (mean) | prefill tokens "
      "computed | TTFT mean ms | TTFT p50 ms | TTFT p90 ms | TTFT p99 ms | req/s | worker imbalance | measured prefill "
      "utilisation (while arriving) |\n";
  out += "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n";
  for (const auto& run : runs) {
    if (run.contains("failure")) {
      // No figures rather than zeros that read as figures: the reason follows the table.
      out += "| " + run.value("name", "") + " | failed (below) |" + repeat(" - |", 12) + "\n";
      continue;
    }
    const auto& ttft = run["ttft_ms"];
    out += "| " + run.value("name", "") + " | " + std::to_string(run.value("requests", 0)) + " | " +
           std::to_string(run.value("errors", 0)) + " | " + percent(run.value("hit_rate", 0.0)) + " | " +
           (run.value("ceiling_tokens", 0) > 0 ? percent(run.value("hit_over_ceiling", 0.0)) : std::string("-")) +
           " | " + later_turns(run["session_hit_rate_after_first_turn"]) + " | " +
           std::to_string(run.value("prefill_tokens_computed", std::uint64_t{0})) + " | " +
           format("%.1f", ttft.value("mean", 0.0)) + " | " + format("%.1f", ttft.value("p50", 0.0)) + " | " +
           format("%.1f", ttft.value("p90", 0.0)) + " | " + format("%.1f", ttft.value("p99", 0.0)) + " | " +
           format("%.1f", run.value("requests_per_second", 0.0)) + " | " +
           format("%.2f", run.value("worker_imbalance", 0.0)) + " | " +
           (run.contains("measured_prefill_utilisation") ? percent(run.value("measured_prefill_utilisation", 0.0))
                                                         : std::string("-")) +
           (run.contains("measured_prefill_utilisation_while_arriving")
                ? " (" + percent(run.value("measured_prefill_utilisation_while_arriving", 0.0)) + ")"
                : std::string()) +
           " |\n";
  }
  double bench_cpu = 0;
  for (const auto& run : runs) {
    bench_cpu = std::max(bench_cpu, run.value("bench_cpu_share", 0.0));
  }
  if (bench_cpu > 0) {
    out += "\nThe bench used at most " + percent(bench_cpu) + " of one core in any run.\n";
  }
  // Replicas serving LoRA adapters: how many loads each placement caused.
  std::string adapter_loads;
  for (const auto& run : runs) {
    if (run.contains("adapter_loads_per_1000_requests")) {
      adapter_loads += "| " + run.value("name", "") + " | " +
                       format("%.1f", run.value("adapter_loads_per_1000_requests", 0.0)) + " |\n";
    }
  }
  // kvgate's predicted cached tokens against the engine's report.
  std::string predictions;
  for (const auto& run : runs) {
    const auto& figures = run.contains("predictions") ? run["predictions"] : json();
    if (!figures.is_object()) {
      continue;
    }
    const double requests = std::max(1.0, figures.value("requests", 0.0));
    predictions += "| " + run.value("name", "") + " | " + std::to_string(figures.value("requests", 0)) + " | " +
                   percent(figures.value("exact", 0.0) / requests) + " | " +
                   percent(figures.value("over", 0.0) / requests) + " | " +
                   percent(figures.value("full_attention_exact", 0.0) / requests) + " | " +
                   percent(figures.value("full_attention_over", 0.0) / requests) + " |\n";
  }
  if (!predictions.empty()) {
    out +=
        "\nkvgate's predicted cached tokens against the engine's (its route receipts), and what the "
        "full-attention group alone predicts (a peer-style index on a hybrid model):\n\n"
        "| run | predicted requests | exact | over | full-attention-only exact | full-attention-only over |\n"
        "|---|---|---|---|---|---|\n" +
        predictions;
  }
  if (!adapter_loads.empty()) {
    out +=
        "\nLoRA adapter loads on the replicas (each delays the step that loads it):\n\n"
        "| run | adapter loads per 1,000 requests |\n|---|---|\n" +
        adapter_loads;
  }
  for (const auto& run : runs) {
    if (run.contains("failure")) {
      out += "\nRun `" + run.value("name", "") + "` failed: " + run.value("failure", "") + "\n";
    } else if (run.value("requests", 0) > 0 && run.value("succeeded", 0) == 0) {
      out += "\nRun `" + run.value("name", "") + "` rejected the workload: none of its " +
             std::to_string(run.value("requests", 0)) + " requests succeeded (" + member(run, "error_kinds").dump() +
             ").\n";
    }
  }
  auto relative = [](double value, double reference) {
    return reference > 0 ? format("%.2fx", value / reference) : std::string("n/a");
  };
  if (runs.size() > 1) {
    for (auto base_index : baseline_indexes(runs, meta)) {
      const auto& base = runs[base_index];
      if (base.contains("failure")) {
        continue;  // nothing to compare with
      }
      out += "\nAgainst `" + base.value("name", "") +
             "` (ratio of each run to it, measured in the same invocation; below 1 is better except for the hit "
             "rate):\n\n";
      out += "| run | hit rate | prefill tokens computed | TTFT mean | TTFT p50 | TTFT p90 | TTFT p99 |\n";
      out += "|---|---|---|---|---|---|---|\n";
      for (std::size_t index = 0; index < runs.size(); ++index) {
        if (index == base_index) {
          continue;
        }
        const auto& run = runs[index];
        if (run.contains("failure")) {
          out += "| " + run.value("name", "") + " | failed |" + repeat(" - |", 5) + "\n";
          continue;
        }
        out += "| " + run.value("name", "") + " | " +
               relative(run.value("hit_rate", 0.0), base.value("hit_rate", 0.0)) + " | " +
               relative(run.value("prefill_tokens_computed", 0.0), base.value("prefill_tokens_computed", 0.0)) + " | ";
        for (const char* statistic : {"mean", "p50", "p90", "p99"}) {
          out += relative(run["ttft_ms"].value(statistic, 0.0), base["ttft_ms"].value(statistic, 0.0)) + " | ";
        }
        out.pop_back();
        out += "\n";
      }
    }
  }
  if (std::any_of(runs.begin(), runs.end(), [](const json& run) { return member(run, "subagents").is_object(); })) {
    const auto& base = runs[baseline_indexes(runs, meta).front()];
    const auto& base_subagents = member(base, "subagents");
    out +=
        "\n## Sub-agents\n\nRequests of sub-agents, and of forks that ran several sub-agents at once "
        "(siblings), each with the session's key.\n\n| run | sub-agent requests | hit rate | TTFT mean ms | "
        "sibling requests | sibling hit rate | sibling TTFT mean ms | sibling TTFT vs " +
        base.value("name", "") + " |\n|---|---|---|---|---|---|---|---|\n";
    for (const auto& run : runs) {
      const auto& figures = member(run, "subagents");
      if (!figures.is_object()) {
        continue;
      }
      const auto& sibling_ttft = member(figures, "sibling_ttft_mean_ms");
      const auto& base_ttft = member(base_subagents, "sibling_ttft_mean_ms");
      out += "| " + run.value("name", "") + " | " + std::to_string(figures.value("requests", 0)) + " | " +
             percent(figures.value("hit_rate", 0.0)) + " | " + format("%.1f", figures.value("ttft_mean_ms", 0.0)) +
             " | " + std::to_string(figures.value("sibling_requests", 0)) + " | " +
             percent(figures.value("sibling_hit_rate", 0.0)) + " | " +
             (sibling_ttft.is_number() ? format("%.1f", sibling_ttft.get<double>()) : std::string("-")) + " | " +
             (sibling_ttft.is_number() && base_ttft.is_number()
                  ? relative(sibling_ttft.get<double>(), base_ttft.get<double>())
                  : std::string("-")) +
             " |\n";
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
  constexpr std::size_t kTurnsShown = 30;  // long agent sessions have hundreds (summary.json has them all)
  for (std::size_t turn = 0; turn < std::min(turns, kTurnsShown); ++turn) {
    out += "| " + std::to_string(turn + 1) + " |";
    for (const auto& run : runs) {
      const auto& by_turn = run["hit_rate_by_turn"];
      out += " " + (turn < by_turn.size() ? percent(by_turn[turn].value("hit_rate", 0.0)) : std::string("-")) + " |";
    }
    out += "\n";
  }
  if (turns > kTurnsShown) {
    out += "\n(turns " + std::to_string(kTurnsShown + 1) + " to " + std::to_string(turns) + " in summary.json)\n";
  }
  return out;
}

std::string capacity_markdown(const json& capacity) {
  std::string out = "# kvgate-bench capacity\n\nWorkload `" + capacity.value("workload", "") +
                    "`, SLO: p90 TTFT <= " + format("%.0f", capacity.value("slo_p90_ttft_ms", 0.0)) +
                    " ms, no errors.\n";
  const auto& meta = member(capacity, "meta");
  if (meta.is_object() && !meta.value("fleet", "").empty()) {
    out += "Fleet: " + meta.value("fleet", "") + ".\n";
  }
  const auto& targets = member(capacity, "targets");
  auto rate_of = [](const json& target) {
    const auto& dial = member(target, "capacity");
    if (!dial.is_object()) {
      return 0.0;
    }
    return dial.contains("sessions_per_minute") ? dial.value("sessions_per_minute", 0.0)
                                                : dial.value("requests_per_second", 0.0);
  };
  const bool sessions = !targets.empty() && member(targets.front(), "capacity").is_object() &&
                        targets.front()["capacity"].contains("sessions_per_minute");
  // The lowest load that missed above the capacity: the capacity lies in
  // [capacity, missed at), so two targets tie unless their brackets part.
  auto missed_at = [](const json& target) {
    double lowest = 0;
    for (const auto& step : member(target, "steps")) {
      const double load = step.value("load", 0.0);
      if (!step.value("held", false) && load > target.value("capacity_load", 0.0) && (lowest == 0 || load < lowest)) {
        lowest = load;
      }
    }
    return lowest > 0 ? percent(lowest) : std::string("-");
  };
  out += "\n| target | capacity (load) | missed at | capacity (" +
         std::string(sessions ? "sessions/min" : "requests/s") + ") | steps |";
  std::vector<std::string> references;
  for (const auto& target : targets) {
    const auto name = target.value("name", "");
    if (name == "round_robin" || name.starts_with("nginx")) {
      references.push_back(name);
      out += " vs " + name + " |";
    }
  }
  out += "\n|---|---|---|---|---|";
  for (std::size_t index = 0; index < references.size(); ++index) {
    out += "---|";
  }
  out += "\n";
  for (const auto& target : targets) {
    if (target.contains("failure")) {
      out += "| " + target.value("name", "") + " | " + target.value("failure", "") + " | - | - | 0 |" +
             repeat(" - |", references.size()) + "\n";
      continue;
    }
    out += "| " + target.value("name", "") + " | " + percent(target.value("capacity_load", 0.0)) + " | " +
           missed_at(target) + " | " + format("%.2f", rate_of(target)) + " | " +
           std::to_string(member(target, "steps").size()) + " |";
    for (const auto& reference : references) {
      double base = 0;
      for (const auto& other : targets) {
        if (other.value("name", "") == reference) {
          base = other.value("capacity_load", 0.0);
        }
      }
      out += " " + (base > 0 ? format("%.2fx", target.value("capacity_load", 0.0) / base) : std::string("n/a")) + " |";
    }
    out += "\n";
  }
  out += "\n## Steps\n\n| target | load | p90 TTFT ms | errors | hit rate | measured prefill utilisation | SLO |\n";
  out += "|---|---|---|---|---|---|---|\n";
  for (const auto& target : targets) {
    for (const auto& step : member(target, "steps")) {
      const auto& measured = member(step, "measured_prefill_utilisation");
      out += "| " + target.value("name", "") + " | " + percent(step.value("load", 0.0)) + " | " +
             format("%.1f", step.value("ttft_p90_ms", 0.0)) + " | " + std::to_string(step.value("errors", 0)) + " | " +
             percent(step.value("hit_rate", 0.0)) + " | " +
             (measured.is_number() ? percent(measured.get<double>()) : std::string("-")) + " | " +
             (step.value("held", false) ? "held" : "missed") + " |\n";
    }
  }
  return out;
}

std::string trajectory_markdown(const json& trajectory) {
  auto number_or_dash = [](const json& value, const char* pattern) {
    return value.is_number() ? format(pattern, value.get<double>()) : std::string("–");
  };
  auto percent_or_dash = [](const json& value) {
    return value.is_number() ? percent(value.get<double>()) : std::string("–");
  };
  std::string out = "# kvgate-bench trajectory\n\nSession `" + trajectory.value("session", "") + "`";
  const auto& meta = member(trajectory, "meta");
  if (meta.is_object() && !meta.value("workload", "").empty()) {
    out += " of `" + meta.value("workload", "") + "`";
  }
  out +=
      ", replayed from reset caches three ways: `sticky` (with its session key), `no_session_key` (without), "
      "`cold_second_turn` (with its key, the second turn sent straight to a replica that never saw the first).\n";
  if (meta.is_object() && !meta.value("fleet", "").empty()) {
    out += "Fleet: " + meta.value("fleet", "") + ".\n";
  }
  for (const auto& target : member(trajectory, "targets")) {
    out += "\n## " + target.value("name", "") +
           "\n\n| mode | turns | hit rate after turn 1 | TTFT mean | prefill "
           "tokens computed | worker changes |\n|---|---|---|---|---|---|\n";
    for (const auto& mode : member(target, "modes")) {
      const auto& summary = member(mode, "summary");
      out += "| " + mode.value("mode", "") + " | " + std::to_string(summary.value("answered", 0)) + "/" +
             std::to_string(summary.value("turns", 0)) + " | " +
             percent_or_dash(member(summary, "hit_rate_after_first")) + " | " +
             number_or_dash(member(summary, "ttft_mean_ms"), "%.1f ms") + " | " +
             std::to_string(summary.value("prefill_tokens_computed", 0)) + " | " +
             std::to_string(summary.value("worker_changes", 0)) + " |\n";
    }
    const auto& cost = member(target, "cold_second_turn_cost");
    if (cost.is_object()) {
      out += "\nThe cold second turn (on " + cost.value("cold_worker", "") + ") took " +
             format("%.1f", cost.value("cold_ttft_ms", 0.0)) + " ms to its first token against " +
             format("%.1f", cost.value("sticky_ttft_ms", 0.0)) +
             " ms when it followed the first: " + format("%+.1f", cost.value("extra_ttft_ms", 0.0)) + " ms" +
             (member(cost, "ttft_ratio").is_number() ? " (" + format("%.2fx", cost["ttft_ratio"].get<double>()) + ")"
                                                     : std::string()) +
             ", and " + std::to_string(cost.value("extra_prefill_tokens", 0)) + " more prompt tokens computed.\n";
    }
    for (const auto& mode : member(target, "modes")) {
      out += "\n### " + target.value("name", "") + ", " + mode.value("mode", "") + "\n\n";
      if (member(mode, "note").is_string()) {
        out += mode["note"].get<std::string>() + "\n\n";
      }
      out +=
          "| turn | worker | input tokens | predicted cached | engine cached | hit | TTFT ms | decode ms | KV "
          "usage |\n|---|---|---|---|---|---|---|---|---|\n";
      for (const auto& turn : member(mode, "turns")) {
        std::string worker = member(turn, "worker").is_string() ? turn["worker"].get<std::string>() : "–";
        if (turn.value("direct", false)) {
          worker += " (direct)";
        }
        if (member(turn, "error").is_string()) {
          out += "| " + std::to_string(turn.value("turn", 0)) + " | " + worker +
                 " | failed: " + turn["error"].get<std::string>() + " | | | | | | |\n";
          continue;
        }
        out += "| " + std::to_string(turn.value("turn", 0)) + " | " + worker + " | " +
               std::to_string(turn.value("input_tokens", 0)) + " | " +
               number_or_dash(member(turn, "predicted_cached_tokens"), "%.0f") + " | " +
               std::to_string(turn.value("cached_tokens", 0)) + " | " + percent_or_dash(member(turn, "hit_rate")) +
               " | " + number_or_dash(member(turn, "ttft_ms"), "%.1f") + " | " +
               number_or_dash(member(turn, "decode_ms"), "%.1f") + " | " + percent_or_dash(member(turn, "kv_usage")) +
               " |\n";
      }
    }
  }
  return out;
}

}  // namespace kvgate::load
