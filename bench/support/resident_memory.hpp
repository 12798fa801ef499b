#pragma once
// The process's resident memory, for benchmarks that report what a
// structure costs (Linux: /proc/self/statm).
#include <unistd.h>

#include <cstddef>
#include <fstream>

namespace kvgate::bench {

inline std::size_t resident_bytes() {
  std::ifstream statm("/proc/self/statm");
  std::size_t pages = 0;
  std::size_t resident = 0;
  statm >> pages >> resident;
  return resident * static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
}

}  // namespace kvgate::bench
