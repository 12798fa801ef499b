#pragma once
// How a test asks kvgate-test-upstream to misbehave for one request: the
// header `x-test-fault`, forwarded by kvgate like any end-to-end header.
//   status:500      answer with that status and an OpenAI-style error
//   stall           read the request, never answer
//   drop_after:N    stream N events, then reset the connection
//   hold_after:N    stream N events, then wait for POST /control/release
//   hold_last       stream everything up to "data: [DONE]", then hold the
//                   body's end (the chunk terminator) until released
//   delay_ms:D      wait D ms before each event / before a plain answer
// Several may be combined with commas: "delay_ms:50,drop_after:3".
#include <optional>
#include <string_view>

namespace kvgate::testing {

struct Fault {
  std::optional<int> status;
  bool stall = false;
  std::optional<int> drop_after;
  std::optional<int> hold_after;
  bool hold_first = false;  // a stream's header goes out, then nothing until released (a prefill in progress)
  bool hold_last = false;   // [DONE] goes out, the body's end waits until released
  int delay_ms = 0;
};

inline Fault parse_fault(std::string_view header) {
  Fault fault;
  while (!header.empty()) {
    auto comma = header.find(',');
    auto item = header.substr(0, comma);
    header = comma == std::string_view::npos ? std::string_view{} : header.substr(comma + 1);
    auto colon = item.find(':');
    auto name = item.substr(0, colon);
    int value = 0;
    if (colon != std::string_view::npos) {
      for (char digit : item.substr(colon + 1)) {
        value = value * 10 + (digit - '0');
      }
    }
    if (name == "status") {
      fault.status = value;
    } else if (name == "stall") {
      fault.stall = true;
    } else if (name == "drop_after") {
      fault.drop_after = value;
    } else if (name == "hold_first") {
      fault.hold_first = true;
    } else if (name == "hold_last") {
      fault.hold_last = true;
    } else if (name == "hold_after") {
      fault.hold_after = value;
    } else if (name == "delay_ms") {
      fault.delay_ms = value;
    }
  }
  return fault;
}

}  // namespace kvgate::testing
