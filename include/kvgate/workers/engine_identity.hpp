#pragma once
// What a worker's engine says it is, and how that completes the worker's
// configuration. Pure: the scraper (metrics_scraper.hpp) fetches the pages,
// the gateway applies the result to the keys the configuration left out.
//
// Sources (../shared/docs/engines.md, section 2; docs/routing.md):
//   - the /metrics names: every engine prefixes its own (vllm:, sglang:,
//     llamacpp:), so one scrape tells the kind;
//   - llama-server's GET /props: total_slots, each slot's n_ctx and the
//     build. Its --cache-ram size is reported nowhere: it is assumed at
//     llama.cpp's default and corrected from the worker's answers
//     (RamCacheEvidence).
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kvgate/config/options.hpp"
#include "kvgate/core/result.hpp"
#include "kvgate/workers/prometheus_text.hpp"

namespace kvgate::workers {

struct EngineIdentity {
  config::EngineKind kind = config::EngineKind::vllm;
  std::string evidence;                              // where the kind was read, for /debug/workers and logs
  std::optional<std::uint32_t> slots;                // llama-server's total_slots
  std::optional<std::uint32_t> slot_context_tokens;  // llama-server's n_ctx per slot
  std::string build;                                 // llama-server's build_info
  bool operator==(const EngineIdentity&) const = default;
};

// The engine whose names the exposition carries (the most samples win);
// nullopt when it carries none of the three.
std::optional<config::EngineKind> engine_kind_from_metrics(const ParsedMetrics& metrics);

// llama-server's GET /props body.
struct LlamacppProps {
  std::uint32_t total_slots = 0;
  std::optional<std::uint32_t> slot_context_tokens;
  std::string build;
};
Result<LlamacppProps, std::string> parse_llamacpp_props(std::string_view body);

// The LoRA adapters an engine's GET /v1/models lists on `base_model`: the
// entries whose "parent" is that model (vLLM's form, adapters loaded at
// start or through /v1/load_lora_adapter), in the order listed, at most
// kMaxListedAdapters, names of at most 256 bytes.
inline constexpr std::size_t kMaxListedAdapters = 256;
Result<std::vector<std::string>, std::string> parse_served_adapters(std::string_view body, std::string_view base_model);

// Whether the worker's answers show a host-RAM prompt cache (llama-server
// --cache-ram): a turn credited with a sequence only the RAM cache could
// hold that the engine computed again counts against it; one the engine
// served from it counts for it. Once the worker showed none (and the RAM
// cache is no longer modelled), a turn served well beyond what the slots
// held counts for it. Two against and fewer than a third as many for
// decide "none"; two for and fewer than a third as many against "one"
// (four once it was "none"); evidence more mixed than that keeps the last
// verdict.
class RamCacheEvidence {
 public:
  // `slot_tokens`: the predicted cached tokens a slot holds; `ram_tokens`:
  // those credited from the RAM cache on top; `reported`: the engine's
  // cached tokens; `block_tokens`: the prediction's grain.
  // Returns the verdict when this answer changed it.
  std::optional<bool> record(std::uint32_t slot_tokens, std::uint32_t ram_tokens, std::uint32_t reported,
                             std::uint32_t block_tokens);
  [[nodiscard]] std::optional<bool> verdict() const { return verdict_; }

 private:
  std::uint32_t for_ = 0;
  std::uint32_t against_ = 0;
  std::optional<bool> verdict_;
};

// The worker as routing models it: the configured keys as written, the
// others from the engine (`identity`, absent until it answered) and from
// its answers (`ram_cache`: whether it keeps a RAM prompt cache).
config::WorkerOptions resolve_engine(const config::WorkerOptions& configured,
                                     const std::optional<EngineIdentity>& identity, std::optional<bool> ram_cache);

// Configured values the engine contradicts, one sentence each naming both
// (logged as warnings; the configuration still wins).
std::vector<std::string> contradictions(const config::WorkerOptions& configured, const EngineIdentity& identity);

}  // namespace kvgate::workers
