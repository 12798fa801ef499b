#include "kvgate/route/explain.hpp"

#include <array>
#include <cstdio>

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
      {"at_risk_tokens", candidate.at_risk_tokens},
      {"queue_delay_ms", optional_number(candidate.queue_delay_ms)},
      {"prefill_ms", optional_number(candidate.prefill_ms)},
      {"requests_ahead", candidate.expected_ttft_ms < 0 ? json(nullptr) : json(candidate.requests_ahead)},
      {"slot_wait_ms", candidate.expected_ttft_ms < 0 ? json(nullptr) : json(candidate.slot_wait_ms)},
      {"slot_forecast_ms", candidate.expected_ttft_ms < 0 ? json(nullptr) : json(candidate.slot_forecast_ms)},
      {"receive_ms", optional_number(candidate.receive_ms)},
      {"offloaded_cached_tokens", candidate.receive_ms < 0 ? json(nullptr) : json(candidate.offloaded_cached_tokens)},
      {"expected_ttft_ms", optional_number(candidate.expected_ttft_ms)},
      {"evicts_ms", optional_number(candidate.evicts_ms)},
      {"evicted_blocks", candidate.evicts_ms < 0 ? json(nullptr) : json(candidate.evicted_blocks)},
      {"kv_excess_tokens", candidate.displaced_ms < 0 ? json(nullptr) : json(candidate.kv_excess_tokens)},
      {"displaced_ms", optional_number(candidate.displaced_ms)},
      {"congestion_ms", optional_number(candidate.congestion_ms)},
      {"score_noise_ms", candidate.expected_ttft_ms < 0 ? json(nullptr) : json(candidate.score_noise_ms)},
      {"indexed_blocks", candidate.indexed_blocks},
      {"adapter",
       candidate.adapter == policy::AdapterState::base ? json(nullptr) : json(policy::to_string(candidate.adapter))},
      {"adapter_load_ms", optional_number(candidate.adapter_load_ms)}};
}

}  // namespace

json candidates_json(const std::vector<policy::Candidate>& candidates) {
  json result = json::array();
  for (const auto& candidate : candidates) {
    result.push_back(candidate_json(candidate));
  }
  return result;
}

json prefill_json(const RouteDecision& decision) {
  if (!decision.prefill) {
    return nullptr;
  }
  const auto& prefill = *decision.prefill;
  json candidates = json::array();
  for (const auto& candidate : prefill.candidates) {
    candidates.push_back({{"worker", candidate.id},
                          {"eligible", candidate.eligible},
                          {"ineligible_because", candidate.ineligible_because == policy::Ineligible::none
                                                     ? json(nullptr)
                                                     : json(policy::to_string(candidate.ineligible_because))},
                          {"cached_tokens", candidate.cached_tokens},
                          {"queue_ms", candidate.queue_ms},
                          {"prefill_ms", candidate.prefill_ms},
                          {"transfer_ms", candidate.transfer_ms},
                          {"expected_ms", candidate.expected_ms}});
  }
  json worker = nullptr;
  if (prefill.worker) {
    for (const auto& candidate : prefill.candidates) {
      if (candidate.worker == *prefill.worker) {
        worker = candidate.id;
      }
    }
  }
  return {{"reason", policy::to_string(prefill.reason)},
          {"worker", std::move(worker)},
          {"decoder_cached_tokens", prefill.decoder_cached_tokens},
          {"local_ms", prefill.local_ms},
          {"remote_ms", optional_number(prefill.remote_ms)},
          {"transfer_ms_per_token", prefill.transfer_ms_per_token},
          {"transfer_source", policy::to_string(prefill.transfer_source)},
          {"candidates", std::move(candidates)}};
}

namespace {

std::string milliseconds(double value) {
  if (value < 0) {
    return "-";
  }
  char text[32];
  std::snprintf(text, sizeof text, "%.1f ms", value);
  return text;
}

}  // namespace

std::string explain_text(const ModelRoute& model, const RouteDecision& decision) {
  std::string text;
  auto id = [&](std::size_t index) { return std::string(model.workers[index].state->id()); };
  if (!decision.worker) {
    text += "no worker: " + std::string(policy::to_string(decision.reason)) + "\n";
  } else {
    text += "worker " + id(*decision.worker) + ", because " + std::string(policy::to_string(decision.reason));
    if (decision.reason != decision.policy_reason) {
      text += " (policy: " + std::string(policy::to_string(decision.policy_reason)) + ")";
    }
    text += "\n";
    if (decision.session) {
      text += "session: turn " + std::to_string(decision.session->turns + 1) + ", previous worker " +
              decision.session->worker + (decision.session->expired ? " (expired)" : "") + "\n";
    }
    text += "prompt: " + std::to_string(decision.input_tokens) + " tokens, " +
            std::to_string(decision.indexed_cached_tokens) + " predicted cached on " + id(*decision.worker);
    if (decision.best_cached_tokens > decision.predicted_cached_tokens) {
      text += " (another worker holds " + std::to_string(decision.best_cached_tokens) + ")";
    }
    text += "\n";
    if (decision.work_price >= 0) {
      std::array<char, 32> price{};
      std::snprintf(price.data(), price.size(), "%.2f", decision.work_price);
      text += "price of work: " + std::string(price.data()) + " ms of the fleet's time per ms of prefill\n";
    }
    if (const auto& prefill = decision.prefill) {
      text += "prefill: " + std::string(policy::to_string(prefill->reason));
      if (prefill->worker) {
        text += " on " + id(*prefill->worker) + ", expected " + milliseconds(prefill->remote_ms) + " with the transfer";
      }
      text += "; on the decoder " + milliseconds(prefill->local_ms) + " (it holds " +
              std::to_string(prefill->decoder_cached_tokens) + " tokens)\n";
    }
    if (decision.runner_up) {
      text += "runner-up: " + id(*decision.runner_up);
      if (decision.gap_ms >= 0) {
        text += ", its first token expected " + milliseconds(decision.gap_ms) + " later";
      }
      text += "\n";
    }
  }
  text += "candidates (cached tokens, queue, prefill, expected first token):\n";
  for (std::size_t index = 0; index < decision.candidates.size(); ++index) {
    const auto& candidate = decision.candidates[index];
    text += (decision.worker == index ? "  * " : "    ") + std::string(candidate.worker) + ": ";
    if (!candidate.eligible) {
      text += "not eligible (" + std::string(policy::to_string(candidate.ineligible_because)) + ")\n";
      continue;
    }
    text += std::to_string(candidate.cached_tokens) + (candidate.drifting ? " (drifting, not credited)" : "") + ", " +
            milliseconds(candidate.queue_delay_ms) + ", " + milliseconds(candidate.prefill_ms) + ", " +
            milliseconds(candidate.expected_ttft_ms);
    if (candidate.requests_ahead > 0) {
      text += " (every slot busy: " + std::to_string(candidate.requests_ahead) + " ahead, " +
              milliseconds(candidate.slot_wait_ms) + " waiting for one)";
    }
    text += "\n";
  }
  return text;
}

}  // namespace kvgate::route
