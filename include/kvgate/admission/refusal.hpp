#pragma once
// Why admission refused a request (a 429 with Retry-After): the reasons
// label kvgate_admission_rejections_total and the error code the client
// reads.
#include <array>
#include <cstdint>
#include <string_view>

namespace kvgate::admission {

enum class RefusalReason : std::uint8_t {
  requests_per_minute,       // the tenant's request budget is spent
  prompt_tokens_per_minute,  // the tenant's prompt-token budget is spent
  queue_full,                // admission.queue.max_length requests already wait
  queue_timeout,             // no slot within admission.queue.max_wait
  abandoned,                 // the client closed its connection while queued (nothing is sent)
  at_capacity,               // the in-flight limits are reached and the caller does not queue (the endpoint picker)
};
inline constexpr std::array kRefusalReasons{RefusalReason::requests_per_minute, RefusalReason::prompt_tokens_per_minute,
                                            RefusalReason::queue_full,          RefusalReason::queue_timeout,
                                            RefusalReason::abandoned,           RefusalReason::at_capacity};

inline constexpr std::string_view to_string(RefusalReason reason) {
  switch (reason) {
    case RefusalReason::requests_per_minute:
      return "requests_per_minute";
    case RefusalReason::prompt_tokens_per_minute:
      return "prompt_tokens_per_minute";
    case RefusalReason::queue_full:
      return "queue_full";
    case RefusalReason::queue_timeout:
      return "queue_timeout";
    case RefusalReason::abandoned:
      return "abandoned";
    case RefusalReason::at_capacity:
      return "at_capacity";
  }
  return "queue_full";
}

struct Refusal {
  RefusalReason reason = RefusalReason::queue_full;
  std::uint64_t retry_after_ms = 1000;
};

}  // namespace kvgate::admission
