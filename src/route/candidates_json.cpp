#include "kvgate/route/candidates_json.hpp"

namespace kvgate::route {

using nlohmann::json;

namespace {

json optional_number(double value) {
  return value < 0 ? json(nullptr) : json(value);
}

json candidate_json(const policy::Candidate& candidate) {
  return {
      {"worker", candidate.worker},
      {"eligible", candidate.eligible},
      {"ineligible_because", candidate.ineligible_because == policy::Ineligible::none
                                 ? json(nullptr)
                                 : json(policy::to_string(candidate.ineligible_because))},
      {"drifting", candidate.drifting},
      {"in_flight", candidate.in_flight},
      {"score", candidate.score},
      {"cached_tokens", candidate.cached_tokens},
      {"queue_delay_ms", optional_number(candidate.queue_delay_ms)},
      {"prefill_ms", optional_number(candidate.prefill_ms)},
      {"receive_ms", optional_number(candidate.receive_ms)},
      {"offloaded_cached_tokens", candidate.receive_ms < 0 ? json(nullptr) : json(candidate.offloaded_cached_tokens)},
      {"expected_ttft_ms", optional_number(candidate.expected_ttft_ms)},
      {"evicts_ms", optional_number(candidate.evicts_ms)},
      {"evicted_blocks", candidate.evicts_ms < 0 ? json(nullptr) : json(candidate.evicted_blocks)},
      {"score_noise_ms", candidate.expected_ttft_ms < 0 ? json(nullptr) : json(candidate.score_noise_ms)},
      {"indexed_blocks", candidate.indexed_blocks}};
}

}  // namespace

json candidates_json(const std::vector<policy::Candidate>& candidates) {
  json result = json::array();
  for (const auto& candidate : candidates) {
    result.push_back(candidate_json(candidate));
  }
  return result;
}

}  // namespace kvgate::route
