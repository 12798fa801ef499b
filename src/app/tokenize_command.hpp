#pragma once
// `kvgate tokenize --tokenizer DIR [--chat]`: JSON lines in, JSON lines out
// (see the README). One output line per input line; a line that cannot be
// processed gives {"error": "..."} and the next line is read.
#include <iosfwd>
#include <string>

namespace kvgate::app {

// Returns the process exit code: 0, or 2 when the tokenizer cannot be loaded.
int run_tokenize(const std::string& folder, bool chat, std::istream& input, std::ostream& output, std::ostream& errors);

}  // namespace kvgate::app
