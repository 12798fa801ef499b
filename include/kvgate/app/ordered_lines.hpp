#pragma once
// Lines in, one output line per input line out, in input order, on several
// threads: the shell of `kvgate tokenize`. The work per line is the
// caller's; this owns the threads, the window of lines in flight and the
// order of the writes.
//
// Threading: the calling thread reads `input`; `threads` worker threads
// each make their own processor (so per-thread state, such as a tokenizer's
// workspace, is built and touched by the thread that uses it) and take
// lines in turn. Whichever worker completes the oldest unwritten line
// writes every completed line in order from there, outside the lock that
// guards the window, so a slow reader of `output` holds back the workers
// (at most `window` lines are read ahead) but never blocks the lock's other
// users while a write is in progress.
#include <cstddef>
#include <functional>
#include <iosfwd>
#include <string>

namespace kvgate::app {

// Appends the output for one line (without its newline) to `out`, which
// arrives empty. Must not throw: a line that fails is the caller's to
// describe in its output.
using LineProcessor = std::function<void(const std::string& line, std::string& out)>;

struct OrderedLinesOptions {
  unsigned threads = 1;
  // Lines read but not yet written, across the threads: memory is bounded
  // by this many lines and their outputs.
  std::size_t window = 16;
};

// Reads `input` to its end; empty lines are skipped (no output line). Each
// worker thread calls `make_processor` once. Unties `input` from any output
// stream while it runs (a tied stream is flushed by every read, from the
// reading thread, which would race with the workers' writes); instead the
// writing worker flushes `output` whenever every line read so far has been
// written, so a program that sends a line and waits for its answer gets
// it. Flushes `output` at the end.
void process_lines_in_order(std::istream& input, std::ostream& output, const OrderedLinesOptions& options,
                            const std::function<LineProcessor()>& make_processor);

}  // namespace kvgate::app
