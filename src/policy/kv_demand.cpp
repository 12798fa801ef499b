#include "kvgate/policy/kv_demand.hpp"

#include <algorithm>

namespace kvgate::policy {

KvDemand kv_demand(std::uint64_t capacity_tokens, std::uint64_t in_flight_prompt_tokens, std::uint32_t input_tokens,
                   std::uint32_t cached_gpu_tokens) {
  KvDemand demand;
  const std::uint64_t total = in_flight_prompt_tokens + input_tokens;
  if (capacity_tokens == 0 || total <= capacity_tokens) {
    return demand;
  }
  demand.excess_tokens = total - capacity_tokens;
  const auto cached = std::min(cached_gpu_tokens, input_tokens);
  demand.own_lost_tokens = static_cast<std::uint32_t>(std::min<std::uint64_t>(cached, demand.excess_tokens));
  // What this request adds to the excess (all of it when the worker was
  // within its memory without it); its own prefix absorbs the first part.
  const auto added = std::min<std::uint64_t>(demand.excess_tokens, input_tokens);
  demand.displaced_tokens = added > demand.own_lost_tokens ? added - demand.own_lost_tokens : 0;
  return demand;
}

}  // namespace kvgate::policy
