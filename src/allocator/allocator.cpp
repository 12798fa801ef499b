// The programs' allocator settings, applied before main (this object is
// linked into each program, not into a library: see CMakeLists.txt).
//
// mimalloc (Debian's libmimalloc) replaces glibc malloc by symbol
// interposition. Its 2 MiB pages matter most on virtual machines, where each
// 4 KiB page fault is costly: three quarters of Gemma 3's tokenizer load
// (32 MB of JSON into about 100 MB of buffers and tables) were first-touch
// page faults; with 2 MiB pages the load takes well under half as long
// (BENCHMARKS.md, "Tokenizer load").
#include <mimalloc.h>

namespace {

const bool kLargePages = [] {
  mi_option_enable(mi_option_large_os_pages);
  mi_option_set(mi_option_eager_commit_delay, 0);
  return true;
}();

}  // namespace
