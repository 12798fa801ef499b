#include "kvgate/workers/engine_identity.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>

namespace kvgate::workers {

using config::CacheModel;
using config::EngineKind;

std::optional<EngineKind> engine_kind_from_metrics(const ParsedMetrics& metrics) {
  std::array<std::size_t, 3> counts{};
  constexpr std::array<std::pair<std::string_view, EngineKind>, 3> kPrefixes{
      {{"vllm:", EngineKind::vllm}, {"sglang:", EngineKind::sglang}, {"llamacpp:", EngineKind::llamacpp}}};
  for (const auto& sample : metrics.samples) {
    for (std::size_t index = 0; index < kPrefixes.size(); ++index) {
      if (std::string_view(sample.name).starts_with(kPrefixes[index].first)) {
        ++counts[index];
      }
    }
  }
  std::optional<EngineKind> kind;
  std::size_t most = 0;
  for (std::size_t index = 0; index < kPrefixes.size(); ++index) {
    if (counts[index] > most) {
      most = counts[index];
      kind = kPrefixes[index].second;
    }
  }
  return kind;
}

Result<LlamacppProps, std::string> parse_llamacpp_props(std::string_view body) {
  const auto document = nlohmann::json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (!document.is_object()) {
    return unexpected(std::string("not a JSON object"));
  }
  const auto slots = document.find("total_slots");
  if (slots == document.end() || !slots->is_number_unsigned() || slots->get<std::uint64_t>() == 0 ||
      slots->get<std::uint64_t>() > 4096) {
    return unexpected(std::string("no total_slots between 1 and 4096"));
  }
  LlamacppProps props;
  props.total_slots = slots->get<std::uint32_t>();
  if (const auto settings = document.find("default_generation_settings");
      settings != document.end() && settings->is_object()) {
    if (const auto context = settings->find("n_ctx"); context != settings->end() && context->is_number_unsigned()) {
      props.slot_context_tokens =
          static_cast<std::uint32_t>(std::min<std::uint64_t>(context->get<std::uint64_t>(), 1u << 30));
    }
  }
  if (const auto build = document.find("build_info"); build != document.end() && build->is_string()) {
    props.build = build->get<std::string>().substr(0, 64);
  }
  return props;
}

Result<std::vector<std::string>, std::string> parse_served_adapters(std::string_view body,
                                                                    std::string_view base_model) {
  const auto document = nlohmann::json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (!document.is_object() || !document.contains("data") || !document["data"].is_array()) {
    return unexpected(std::string("not a model list (no data array)"));
  }
  std::vector<std::string> adapters;
  for (const auto& entry : document["data"]) {
    if (!entry.is_object() || !entry.contains("id") || !entry["id"].is_string() || !entry.contains("parent") ||
        !entry["parent"].is_string() || entry["parent"].get<std::string_view>() != base_model) {
      continue;
    }
    auto name = entry["id"].get<std::string>();
    if (name.empty() || name.size() > 256 || name == base_model ||
        std::find(adapters.begin(), adapters.end(), name) != adapters.end()) {
      continue;
    }
    if (adapters.size() == kMaxListedAdapters) {
      break;
    }
    adapters.push_back(std::move(name));
  }
  return adapters;
}

std::optional<bool> RamCacheEvidence::record(std::uint32_t slot_tokens, std::uint32_t ram_tokens,
                                             std::uint32_t reported, std::uint32_t block_tokens) {
  const auto grain = std::max<std::uint32_t>(block_tokens, 1);
  // Token-grained engines report within a block of a block-grained
  // prediction: halfway into the RAM credit tells a restore from a recompute.
  const bool restored = reported * 2 >= slot_tokens * 2 + ram_tokens;
  // While a RAM cache is modelled, it credits what a restore would give:
  // a hit beyond the slots it did not credit is the slot model's error, not
  // evidence. Once the worker showed none, only a hit well beyond the slots
  // (more than a slot's answer or a partial block adds) is.
  const std::uint32_t unexplained = std::max(2 * grain, slot_tokens / 4);
  if (ram_tokens >= grain && !restored) {
    ++against_;  // a prefix only the RAM cache could hold, computed again
  } else if (restored && (ram_tokens >= grain || (verdict_ == false && reported >= slot_tokens + unexplained))) {
    ++for_;  // more than the slots held came from cache
  } else {
    return std::nullopt;
  }
  // Once a worker showed none, a slot model that under-predicts looks like
  // a RAM cache too: turning it back on takes twice the evidence.
  // A verdict needs its side to outweigh the other three to one: the slot
  // model's own misses give a little evidence either way.
  const std::uint32_t needed_for = verdict_ == false ? 4 : 2;
  auto next = verdict_;
  if (against_ >= 2 && against_ >= 3 * for_) {
    next = false;
  } else if (for_ >= needed_for && for_ >= 3 * against_) {
    next = true;
  }
  if (next != verdict_) {
    verdict_ = next;
    for_ = against_ = 0;  // the next verdict must earn its own evidence
    return verdict_;
  }
  if (for_ + against_ >= 8) {
    for_ = against_ = 0;  // mixed evidence: start again
  }
  return std::nullopt;
}

config::WorkerOptions resolve_engine(const config::WorkerOptions& configured,
                                     const std::optional<EngineIdentity>& identity, std::optional<bool> ram_cache) {
  auto resolved = configured;
  const auto& given = configured.given;
  if (!given.engine && identity) {
    resolved.engine = identity->kind;
  }
  const bool llamacpp = resolved.engine == EngineKind::llamacpp;
  const bool has_events = !configured.kv_events.empty();
  if (!given.cache_model) {
    resolved.cache_model = llamacpp && !has_events ? CacheModel::sequences : CacheModel::blocks;
  }
  if (!given.slots) {
    resolved.slots = identity && identity->slots ? *identity->slots : 0;
  }
  if (!given.cache_ram_mib) {
    resolved.cache_ram_mib = llamacpp && resolved.cache_model == CacheModel::sequences && ram_cache.value_or(true)
                                 ? config::kLlamacppDefaultCacheRamMib
                                 : 0;
  }
  if (resolved.cache_model != CacheModel::sequences) {
    resolved.slots = 0;
    resolved.cache_ram_mib = 0;
  }
  return resolved;
}

std::vector<std::string> contradictions(const config::WorkerOptions& configured, const EngineIdentity& identity) {
  std::vector<std::string> found;
  if (configured.given.engine && configured.engine != identity.kind) {
    found.push_back("the configuration says engine " + std::string(config::to_string(configured.engine)) +
                    ", but its " + identity.evidence + " say " + std::string(config::to_string(identity.kind)) +
                    " (remove engine: to follow the engine)");
  }
  if (configured.given.slots && identity.slots && configured.slots != *identity.slots) {
    found.push_back("the configuration says slots " + std::to_string(configured.slots) +
                    ", but llama-server's /props " + "says total_slots " + std::to_string(*identity.slots) +
                    " (remove slots: to follow the engine)");
  }
  return found;
}

}  // namespace kvgate::workers
