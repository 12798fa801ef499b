#pragma once
// The shell's clocks, in one place. The functional core never reads a
// clock: the shell reads one of these once per event (a request, a tick)
// and passes the value in.
#include <chrono>
#include <cstdint>
#include <ctime>

namespace kvgate {

// Milliseconds since the Unix epoch: timestamps shown to people and kept
// in logs, and the router's notion of now.
inline std::uint64_t unix_now_ms() {
  return static_cast<std::uint64_t>(
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
          .count());
}

// Seconds since the Unix epoch, with a fraction (the decision log's ts).
inline double unix_now_seconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// The local wall-clock time, for chat templates' strftime_now (as the
// engine's own clock would read). localtime_r consults the time zone on
// every call: once a second per thread is enough.
inline std::tm local_now() {
  thread_local std::time_t converted = -1;
  thread_local std::tm local{};
  const std::time_t now = std::time(nullptr);
  if (now != converted) {
    localtime_r(&now, &local);
    converted = now;
  }
  return local;
}

}  // namespace kvgate
