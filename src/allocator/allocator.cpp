// The programs' allocator settings, applied before main (this object is
// linked into each program, not into a library: see CMakeLists.txt).
//
// mimalloc (Debian's libmimalloc) replaces glibc malloc by symbol
// interposition. Its 2 MiB pages matter most on virtual machines, where each
// 4 KiB page fault is costly: loading Gemma 3's tokenizer (32 MB of JSON into
// about 100 MB of tables) took 745 ms, three quarters of it first-touch page
// faults; with 2 MiB pages it takes under 200 ms (BENCHMARKS.md).
#include <mimalloc.h>

namespace {

const bool kLargePages = [] {
  mi_option_enable(mi_option_large_os_pages);
  mi_option_set(mi_option_eager_commit_delay, 0);
  return true;
}();

}  // namespace
