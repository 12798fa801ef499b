#pragma once
// The shell's clocks, in one place. The functional core never reads a
// clock: the shell reads one of these once per event (a request, a tick)
// and passes the value in. Every duration (TTLs, ejection windows, ages,
// rates) is measured on the monotonic clock, which a step of the wall
// clock does not move; the wall clock gives timestamps for people and logs
// only. A monotonic stamp is shown as a timestamp with to_unix_ms().
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <ctime>

namespace kvgate {

// Milliseconds on the monotonic clock (steady_clock, from an arbitrary
// start): the router's, the breakers' and the session table's now.
inline std::uint64_t monotonic_now_ms() {
  return static_cast<std::uint64_t>(
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now().time_since_epoch())
          .count());
}

// Milliseconds since the Unix epoch: timestamps shown to people and kept
// in logs.
inline std::uint64_t unix_now_ms() {
  return static_cast<std::uint64_t>(
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
          .count());
}

// A monotonic stamp as Unix milliseconds, given both clocks read at one
// moment (`monotonic_now`, `unix_now`).
constexpr std::uint64_t to_unix_ms(std::uint64_t monotonic_stamp, std::uint64_t monotonic_now, std::uint64_t unix_now) {
  return monotonic_stamp >= monotonic_now ? unix_now + (monotonic_stamp - monotonic_now)
                                          : unix_now - std::min(unix_now, monotonic_now - monotonic_stamp);
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
