#include "dial.hpp"

#include <xxhash.h>

#include <algorithm>
#include <cstdlib>
#include <random>

namespace kvgate::load {

double PrefixCeiling::observe(std::string_view text) {
  const std::size_t blocks = text.size() / block_bytes_;
  std::size_t reusable = 0;
  bool chain_seen = true;
  std::uint64_t chain = 0;
  for (std::size_t block = 0; block < blocks; ++block) {
    // Each block's hash covers its parent's: equal hashes mean equal prefixes.
    chain = XXH3_64bits_withSeed(text.data() + block * block_bytes_, block_bytes_, chain);
    if (chain_seen && seen_.contains(chain)) {
      ++reusable;
    } else {
      chain_seen = false;
      seen_.insert(chain);
    }
  }
  return text.empty() ? 0.0 : static_cast<double>(reusable * block_bytes_) / static_cast<double>(text.size());
}

std::string chat_prefix_text(const std::vector<std::pair<std::string, std::string>>& messages) {
  std::string text;
  for (const auto& [role, content] : messages) {
    // The separators keep ("ab", "c") and ("a", "bc") apart.
    text += role;
    text += '\x1e';
    text += content;
    text += '\x1f';
  }
  return text;
}

OfferedTokens offered_tokens(const Workload& workload, std::uint32_t replicas, std::uint32_t block_tokens) {
  OfferedTokens offered;
  const std::uint32_t block_bytes = block_tokens * kBytesPerToken;
  PrefixCeiling ceiling(block_bytes);
  // Round robin as if its replicas' caches never evicted: request i goes to
  // replica i mod N and reuses what that replica was sent before. A prefix
  // every request shares (a system prompt, an agent's tool preamble) is soon
  // cached everywhere; a conversation's own history is found one time in N.
  std::vector<PrefixCeiling> round_robin(std::max<std::uint32_t>(1, replicas), PrefixCeiling(block_bytes));
  double round_robin_reused = 0;
  auto count = [&](std::string_view text) {
    const double tokens = static_cast<double>(text.size()) / kBytesPerToken;
    offered.prompt += tokens;
    offered.ceiling += ceiling.observe(text) * tokens;
    round_robin_reused += round_robin[offered.requests % round_robin.size()].observe(text) * tokens;
    ++offered.requests;
  };
  for (std::size_t index = 0; index < workload.sessions.size(); ++index) {
    const auto& session = workload.sessions[index];
    std::vector<std::pair<std::string, std::string>> messages;
    if (!session.system.empty()) {
      messages.emplace_back("system", session.system);
    }
    for (std::size_t turn = 0; turn < session.turns.size(); ++turn) {
      const auto& step = session.turns[turn];
      for (const auto& subagent : step.subagents) {
        for (const auto& request : subagent.turns) {
          if (!request.prompt.empty()) {
            count(request.prompt);
          }
        }
      }
      if (step.fork()) {
        continue;
      }
      if (!step.prompt.empty()) {
        count(step.prompt);
        continue;
      }
      messages.emplace_back("user", step.user);
      count(chat_prefix_text(messages));
      // A stand-in answer, unique to this turn, of the length asked for.
      auto answer = "answer " + std::to_string(index) + "." + std::to_string(turn) + " ";
      answer.resize(static_cast<std::size_t>(step.max_tokens) * kBytesPerToken, '~');
      messages.emplace_back("assistant", std::move(answer));
    }
  }
  for (const auto& request : workload.trace) {
    count(request.prompt);
  }
  if (workload.trace.size() > 1) {
    auto [first, last] = std::minmax_element(workload.trace.begin(), workload.trace.end(),
                                             [](const auto& a, const auto& b) { return a.arrival_ms < b.arrival_ms; });
    offered.trace_span_ms = last->arrival_ms - first->arrival_ms;
  }
  offered.round_robin = offered.prompt - round_robin_reused;
  return offered;
}

double session_rate_for_load(const OfferedTokens& offered, std::size_t sessions, double load,
                             double fleet_prefill_tokens_per_s) {
  if (sessions == 0 || offered.round_robin <= 0) {
    return 0;
  }
  const double tokens_per_session = offered.round_robin / static_cast<double>(sessions);
  return load * fleet_prefill_tokens_per_s / tokens_per_session;
}

double trace_speedup_for_load(const OfferedTokens& offered, double load, double fleet_prefill_tokens_per_s) {
  if (offered.round_robin <= 0 || offered.trace_span_ms <= 0) {
    return 0;
  }
  // Unscaled, the trace offers round_robin tokens over its span.
  const double native_tokens_per_s = offered.round_robin / (offered.trace_span_ms / 1000);
  return load * fleet_prefill_tokens_per_s / native_tokens_per_s;
}

std::vector<double> poisson_starts_ms(std::size_t count, double rate_per_s, std::uint64_t seed) {
  std::vector<double> starts;
  starts.reserve(count);
  std::mt19937_64 generator(seed);
  std::exponential_distribution<double> gap(rate_per_s > 0 ? rate_per_s : 1);
  double at = 0;
  for (std::size_t index = 0; index < count; ++index) {
    starts.push_back(at * 1000);
    at += gap(generator);
  }
  return starts;
}

ReplicaMetrics parse_replica_metrics(std::string_view exposition) {
  ReplicaMetrics metrics;
  auto value_of = [](std::string_view line) -> std::optional<double> {
    auto space = line.find_last_of(' ');
    if (space == std::string_view::npos) {
      return std::nullopt;
    }
    const std::string number(line.substr(space + 1));
    char* end = nullptr;
    const double value = std::strtod(number.c_str(), &end);
    if (end == number.c_str() || *end != '\0') {
      return std::nullopt;
    }
    return value;
  };
  const std::pair<std::string_view, std::optional<double> ReplicaMetrics::*> series[] = {
      {"kvgate_sim_prefill_tokens_per_second", &ReplicaMetrics::prefill_tokens_per_s},
      {"kvgate_sim_busy_seconds_total", &ReplicaMetrics::busy_seconds},
      {"kvgate_sim_prefill_seconds_total", &ReplicaMetrics::prefill_seconds},
      {"kvgate_sim_num_gpu_blocks", &ReplicaMetrics::num_gpu_blocks},
      {"vllm:prompt_tokens_total", &ReplicaMetrics::prompt_tokens},
      {"kvgate_sim_lora_loads_total", &ReplicaMetrics::lora_loads},
      {"kvgate_sim_computed_prompt_tokens_total", &ReplicaMetrics::computed_prompt_tokens},
      {"kvgate_sim_kv_transfers_total", &ReplicaMetrics::kv_transfers},
      {"kvgate_sim_kv_transfer_seconds_total", &ReplicaMetrics::kv_transfer_seconds},
      {"kvgate_sim_prefix_hit_tokens_total", &ReplicaMetrics::prefix_hit_tokens},
  };
  while (!exposition.empty()) {
    auto end = exposition.find('\n');
    auto line = exposition.substr(0, end);
    exposition = end == std::string_view::npos ? std::string_view() : exposition.substr(end + 1);
    if (line.empty() || line.front() == '#') {
      continue;
    }
    for (const auto& [name, field] : series) {
      // The name, then labels or the value: not a longer name.
      if (line.starts_with(name) && line.size() > name.size() &&
          (line[name.size()] == '{' || line[name.size()] == ' ')) {
        metrics.*field = value_of(line);
      }
    }
  }
  return metrics;
}

FleetLoad fleet_load(const std::vector<ReplicaMetrics>& before, const std::vector<ReplicaMetrics>& after,
                     double wall_seconds) {
  FleetLoad load;
  if (before.size() != after.size() || before.empty() || wall_seconds <= 0) {
    return load;
  }
  double busy = 0;
  double prefill = 0;
  for (std::size_t index = 0; index < before.size(); ++index) {
    const auto& start = before[index];
    const auto& end = after[index];
    if (!start.busy_seconds || !end.busy_seconds || !start.prefill_seconds || !end.prefill_seconds) {
      return load;
    }
    busy += *end.busy_seconds - *start.busy_seconds;
    prefill += *end.prefill_seconds - *start.prefill_seconds;
  }
  const double capacity = wall_seconds * static_cast<double>(before.size());
  load.busy_fraction = busy / capacity;
  load.prefill_utilisation = prefill / capacity;
  load.measured = true;
  return load;
}

}  // namespace kvgate::load
