#pragma once
// `kvgate tokenize --tokenizer DIR [--chat] [--threads N]`: JSON lines in,
// JSON lines out (see the README). One output line per input line, in input
// order, whatever the number of threads; a line that cannot be processed
// gives {"error": "..."} and the next line is read.
#include <iosfwd>
#include <string>

namespace kvgate::app {

// Returns the process exit code: 0, or 2 when the tokenizer cannot be loaded.
// `threads` lines are encoded at a time, each thread with its own workspace.
int run_tokenize(const std::string& folder, bool chat, unsigned threads, std::istream& input, std::ostream& output,
                 std::ostream& errors);

}  // namespace kvgate::app
