#pragma once
// One request's outcome as the client saw it, and the parsing of a
// completion's server-sent events into it. Pure.
#include <cstdint>
#include <string>

namespace kvgate::load {

struct Answer {
  int status = 0;     // 0: no HTTP answer
  std::string error;  // empty when the request succeeded
  std::string worker;
  std::string receipt;  // x-kvgate-route, when asked for and the target is kvgate
  std::string text;     // the streamed content, concatenated
  std::uint32_t prompt_tokens = 0;
  std::uint32_t cached_tokens = 0;
  std::uint32_t output_tokens = 0;
  double ttft_ms = -1;
  double latency_ms = 0;
};

// Reads a chat or text completion stream's events: the content deltas
// concatenated into `text`, and `usage` (prompt, cached and output tokens)
// from the event that carries it. An error event marks the answer failed.
void read_events(const std::string& events, Answer& answer);

}  // namespace kvgate::load
