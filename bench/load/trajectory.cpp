#include "trajectory.hpp"

#include <algorithm>
#include <charconv>

namespace kvgate::load {

using nlohmann::json;

std::string_view to_string(TrajectoryMode mode) {
  switch (mode) {
    case TrajectoryMode::sticky:
      return "sticky";
    case TrajectoryMode::no_session_key:
      return "no_session_key";
    case TrajectoryMode::cold_second_turn:
      return "cold_second_turn";
  }
  return "sticky";
}

Result<Session, std::string> parse_trajectory(std::string_view text, std::string_view session_id,
                                              const WorkloadOptions& options) {
  const auto first = text.find_first_not_of(" \t\r\n");
  if (first == std::string_view::npos) {
    return unexpected(std::string("the trajectory file is empty"));
  }
  // A whole document with "turns" is an export (perhaps pretty-printed over
  // many lines); anything else is read as JSON lines.
  if (text[first] == '{') {
    auto document = json::parse(text, nullptr, /*allow_exceptions=*/false);
    if (document.is_object() && document.contains("turns")) {
      return session_from_export(document, options);
    }
  }
  // Only the line wanted becomes prompts (a recorded file holds hundreds
  // of sessions of up to ~1 MB of text a turn); every line is still
  // checked to be JSON, and problems are reported by line.
  auto strict = options;
  strict.strict = true;
  strict.sessions = 0;
  std::size_t number = 0;
  std::size_t sessions = 0;
  std::string first_id;
  std::string_view wanted;
  std::size_t wanted_number = 0;
  while (!text.empty()) {
    const auto end = text.find('\n');
    const auto raw = text.substr(0, end);
    text = end == std::string_view::npos ? std::string_view() : text.substr(end + 1);
    ++number;
    if (raw.find_first_not_of(" \t\r") == std::string_view::npos) {
      continue;
    }
    auto line = json::parse(raw, nullptr, /*allow_exceptions=*/false);
    if (!line.is_object()) {
      return unexpected("line " + std::to_string(number) + ": not a JSON object");
    }
    if (line.contains("hash_ids") && !line.contains("requests")) {
      return unexpected("line " + std::to_string(number) +
                        ": a trace request, not a session (a trace has no trajectory to follow)");
    }
    const auto id = line.value("id", std::string());
    ++sessions;
    if (first_id.empty()) {
      first_id = id;
    }
    if (wanted.empty() && (session_id.empty() || id == session_id)) {
      wanted = raw;
      wanted_number = number;
    }
  }
  if (sessions == 0) {
    return unexpected(std::string("the file holds no session"));
  }
  if (wanted.empty()) {
    return unexpected("no session '" + std::string(session_id) + "' in the file (" + std::to_string(sessions) +
                      " sessions, the first '" + first_id + "')");
  }
  // Blank lines in front keep parse_workload's line numbers the file's.
  std::string padded(wanted_number - 1, '\n');
  padded.append(wanted);
  auto workload = parse_workload(padded, "trajectory", strict);
  if (!workload) {
    return unexpected(workload.error());
  }
  if (workload->sessions.empty()) {
    return unexpected("line " + std::to_string(wanted_number) + ": not a session");
  }
  return std::move(workload->sessions.front());
}

std::optional<double> kv_usage_from_metrics(std::string_view text) {
  static constexpr std::string_view kNames[] = {"vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc",
                                                "sglang:token_usage", "llamacpp:kv_cache_usage_ratio"};
  std::optional<double> usage;
  while (!text.empty()) {
    const auto end = text.find('\n');
    auto line = text.substr(0, end);
    text = end == std::string_view::npos ? std::string_view() : text.substr(end + 1);
    const auto name_end = line.find_first_of("{ ");
    if (name_end == std::string_view::npos ||
        std::find(std::begin(kNames), std::end(kNames), line.substr(0, name_end)) == std::end(kNames)) {
      continue;
    }
    // The value follows the last label's brace (labels may hold spaces).
    const auto close = line.rfind('}');
    auto rest = line.substr(close == std::string_view::npos ? name_end : close + 1);
    const auto start = rest.find_first_not_of(' ');
    if (start == std::string_view::npos) {
      continue;
    }
    rest = rest.substr(start, rest.find(' ', start) - start);
    double value = 0;
    const auto [parsed_end, error] = std::from_chars(rest.data(), rest.data() + rest.size(), value);
    if (error == std::errc{} && parsed_end == rest.data() + rest.size() && value >= 0 && value <= 1) {
      usage = std::max(usage.value_or(0.0), value);
    }
  }
  return usage;
}

std::optional<std::uint32_t> receipt_number(std::string_view receipt, std::string_view field) {
  // Fields are "name=value" separated by "; ": a name starts the receipt or
  // follows a separator.
  std::size_t at = 0;
  for (;; ++at) {
    at = receipt.find(field, at);
    if (at == std::string_view::npos) {
      return std::nullopt;
    }
    const bool starts = at == 0 || receipt[at - 1] == ' ';
    if (starts && receipt.substr(at + field.size()).starts_with("=")) {
      break;
    }
  }
  const auto* begin = receipt.data() + at + field.size() + 1;
  std::uint32_t value = 0;
  const auto [end, error] = std::from_chars(begin, receipt.data() + receipt.size(), value);
  if (error != std::errc{} || end == begin) {
    return std::nullopt;
  }
  return value;
}

std::optional<std::size_t> cold_replica(const std::vector<std::string>& replicas, std::string_view first_worker) {
  for (std::size_t index = 0; index < replicas.size(); ++index) {
    if (replicas[index] != first_worker) {
      return index;
    }
  }
  return std::nullopt;
}

namespace {

json optional_number(double value) {
  return value < 0 ? json(nullptr) : json(value);
}

json turn_json(const TrajectoryTurn& turn) {
  return {{"turn", turn.number},
          {"worker", turn.worker.empty() ? json(nullptr) : json(turn.worker)},
          {"direct", turn.direct},
          {"error", turn.error.empty() ? json(nullptr) : json(turn.error)},
          {"input_tokens", turn.input_tokens},
          {"predicted_cached_tokens", turn.predicted_cached_tokens ? json(*turn.predicted_cached_tokens) : json()},
          {"cached_tokens", turn.cached_tokens},
          {"hit_rate",
           turn.input_tokens == 0 ? json(nullptr) : json(static_cast<double>(turn.cached_tokens) / turn.input_tokens)},
          {"ttft_ms", optional_number(turn.ttft_ms)},
          {"decode_ms", optional_number(turn.decode_ms)},
          {"kv_usage", turn.kv_usage ? json(*turn.kv_usage) : json(nullptr)}};
}

json run_summary(const TrajectoryRun& run) {
  std::uint64_t prompt_after_first = 0;
  std::uint64_t cached_after_first = 0;
  std::uint64_t computed = 0;
  double ttft_sum = 0;
  std::size_t answered = 0;
  std::size_t moves = 0;
  const std::string* previous = nullptr;
  for (const auto& turn : run.turns) {
    if (!turn.error.empty()) {
      continue;
    }
    ++answered;
    ttft_sum += std::max(0.0, turn.ttft_ms);
    computed += turn.input_tokens - std::min(turn.cached_tokens, turn.input_tokens);
    if (turn.number >= 2) {
      prompt_after_first += turn.input_tokens;
      cached_after_first += std::min(turn.cached_tokens, turn.input_tokens);
    }
    if (previous != nullptr && *previous != turn.worker) {
      ++moves;
    }
    previous = &turn.worker;
  }
  return {
      {"turns", run.turns.size()},
      {"answered", answered},
      {"hit_rate_after_first",
       prompt_after_first == 0 ? json(nullptr) : json(static_cast<double>(cached_after_first) / prompt_after_first)},
      {"ttft_mean_ms", answered == 0 ? json(nullptr) : json(ttft_sum / answered)},
      {"prefill_tokens_computed", computed},
      {"worker_changes", moves}};
}

const TrajectoryTurn* second_turn(const TrajectoryRun& run) {
  return run.turns.size() >= 2 && run.turns[1].error.empty() ? &run.turns[1] : nullptr;
}

}  // namespace

json trajectory_json(const std::string& session_id, const std::vector<TrajectoryRun>& runs, const json& meta) {
  json targets = json::array();
  std::vector<std::string> order;
  for (const auto& run : runs) {
    if (std::find(order.begin(), order.end(), run.target) == order.end()) {
      order.push_back(run.target);
    }
  }
  for (const auto& target : order) {
    json modes = json::array();
    const TrajectoryRun* sticky = nullptr;
    const TrajectoryRun* cold = nullptr;
    for (const auto& run : runs) {
      if (run.target != target) {
        continue;
      }
      sticky = run.mode == TrajectoryMode::sticky ? &run : sticky;
      cold = run.mode == TrajectoryMode::cold_second_turn ? &run : cold;
      json turns = json::array();
      for (const auto& turn : run.turns) {
        turns.push_back(turn_json(turn));
      }
      modes.push_back({{"mode", to_string(run.mode)},
                       {"note", run.note.empty() ? json(nullptr) : json(run.note)},
                       {"summary", run_summary(run)},
                       {"turns", std::move(turns)}});
    }
    json cold_cost = nullptr;
    const auto* warm_turn = sticky != nullptr ? second_turn(*sticky) : nullptr;
    const auto* cold_turn = cold != nullptr ? second_turn(*cold) : nullptr;
    if (warm_turn != nullptr && cold_turn != nullptr && warm_turn->ttft_ms >= 0 && cold_turn->ttft_ms >= 0) {
      const auto computed = [](const TrajectoryTurn& turn) {
        return static_cast<std::int64_t>(turn.input_tokens) -
               static_cast<std::int64_t>(std::min(turn.cached_tokens, turn.input_tokens));
      };
      cold_cost = {{"sticky_ttft_ms", warm_turn->ttft_ms},
                   {"cold_ttft_ms", cold_turn->ttft_ms},
                   {"extra_ttft_ms", cold_turn->ttft_ms - warm_turn->ttft_ms},
                   {"ttft_ratio", warm_turn->ttft_ms > 0 ? json(cold_turn->ttft_ms / warm_turn->ttft_ms) : json()},
                   {"extra_prefill_tokens", computed(*cold_turn) - computed(*warm_turn)},
                   {"cold_worker", cold_turn->worker}};
    }
    targets.push_back({{"name", target}, {"cold_second_turn_cost", std::move(cold_cost)}, {"modes", std::move(modes)}});
  }
  return {{"session", session_id}, {"meta", meta}, {"targets", std::move(targets)}};
}

}  // namespace kvgate::load
