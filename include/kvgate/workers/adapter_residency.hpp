#pragma once
// Which LoRA adapters a worker holds, as far as the gateway can tell: the
// engine keeps at most max_loras adapters loaded and evicts the least
// recently used (vLLM's LRU adapter cache), so the adapters routed there
// most recently are the ones it holds, and the engine's report
// (vllm:lora_requests_info: the adapters with requests running and
// waiting, and max_lora) says the rest. Atomics only: commits on any I/O
// thread write the routing history, the scraper the report, every decision
// reads both.
#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <span>

#include "kvgate/policy/reason.hpp"

namespace kvgate::workers {

class AdapterResidency {
 public:
  // Adapters of a model the routing history covers (models[].adapters is
  // bounded at this), and the running and waiting adapters of a report kept.
  static constexpr std::size_t kTracked = 256;
  static constexpr std::size_t kReported = 16;

  // The model's adapter `adapter` (its position in models[].adapters) was
  // routed here at `now_ms` (the monotonic clock).
  void routed(std::size_t adapter, std::uint64_t now_ms);
  // The engine's report: the adapters (hashes of their names, adapter_hash)
  // with requests running and waiting, and how many it holds at once (0:
  // not reported). At most kReported of each are kept.
  void publish_report(std::span<const std::uint64_t> running, std::span<const std::uint64_t> waiting,
                      std::uint32_t max_loras);
  [[nodiscard]] std::uint32_t reported_max_loras() const { return max_loras_.load(std::memory_order_relaxed); }

  // Where adapter `adapter` (named `name_hash`) stands here, among the
  // model's `adapters` adapters; `fallback_max_loras` when the engine did
  // not report its own (models[].max_loras). Pure over the atomics' values.
  [[nodiscard]] policy::AdapterState state(std::size_t adapter, std::uint64_t name_hash, std::size_t adapters,
                                           std::uint32_t fallback_max_loras) const;

 private:
  [[nodiscard]] bool reported(const std::array<std::atomic<std::uint64_t>, kReported>& list,
                              std::uint64_t name_hash) const;

  std::array<std::atomic<std::uint64_t>, kTracked> last_routed_{};  // now_ms + 1; 0: never routed here
  std::array<std::atomic<std::uint64_t>, kReported> running_{};     // name hashes; 0: empty entry
  std::array<std::atomic<std::uint64_t>, kReported> waiting_{};
  std::atomic<std::uint32_t> running_count_{0};
  std::atomic<std::uint32_t> max_loras_{0};
};

// The hash an adapter's name is reported and compared by (never 0).
std::uint64_t adapter_hash(std::string_view name);

}  // namespace kvgate::workers
