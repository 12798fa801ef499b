#pragma once
// What a worker's KV memory cannot hold at once (cache_aware, with the
// eviction term). A request pins its prompt's blocks from its admission
// to its last token, and an engine admits a request only when its blocks
// fit beside the running ones (vLLM's scheduler; kvgate-sim's). The
// prompts in flight on a worker (admitted, or waiting at the engine) plus
// this one's are its demand on that memory. Beyond the memory, the
// request waits until others finish, and meanwhile the running requests'
// growth takes the idle blocks, least recently used first: the cached
// prefix it came for is idle until it is admitted, and the prefixes the
// requests waiting there came for are too. So on a worker whose demand
// exceeds its memory:
// - the request's own cached prefix is lost as far as the excess reaches
//   (priced as uncached, like at_risk_tokens);
// - the excess it adds beyond that takes the idle prefixes of the
//   requests already waiting there, each re-computed when they are
//   admitted (displaced tokens, priced at the worker's re-prefill).
// New sessions thus go where their working set fits, and a turn whose
// worker is over-committed weighs its lost prefix against moving. Prompts
// in flight that share a head (a common system prompt) pin its blocks
// once: the demand counts them each time, so it errs towards pressure by
// at most that head per request. Pure: the
// demand is the router's count of prompt tokens in flight
// (WorkerView::active_tokens), the memory the index's capacity.
#include <cstdint>

namespace kvgate::policy {

struct KvDemand {
  std::uint64_t excess_tokens = 0;     // in-flight prompts plus this one beyond the memory
  std::uint32_t own_lost_tokens = 0;   // of the cached prefix on the GPU
  std::uint64_t displaced_tokens = 0;  // other requests' idle prefixes this one evicts
};

// `capacity_tokens` 0: unknown, nothing is priced. `cached_gpu_tokens`: the
// prompt's prefix the worker holds on its GPU (a lower tier's part is
// loaded into new blocks, not kept idle).
[[nodiscard]] KvDemand kv_demand(std::uint64_t capacity_tokens, std::uint64_t in_flight_prompt_tokens,
                                 std::uint32_t input_tokens, std::uint32_t cached_gpu_tokens);

}  // namespace kvgate::policy
