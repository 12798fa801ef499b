#pragma once
// Loading is strict: every unknown key, wrong type, bad duration, duplicate
// id or unusable URL is a problem, and all problems are reported at once with
// the key path and line, so an operator fixes a file in one pass.
#include <string>
#include <vector>

#include "kvgate/config/options.hpp"
#include "kvgate/core/result.hpp"

namespace kvgate::config {

struct Problem {
  std::string file;
  int line = 0;      // 1-based; 0 when not tied to a line
  std::string path;  // e.g. "models[0].workers[1].url"
  std::string message;

  [[nodiscard]] std::string to_string() const;  // "file:line: path: message"
};

using LoadResult = Result<Options, std::vector<Problem>>;

LoadResult load_file(const std::string& path);
LoadResult load_text(const std::string& text, const std::string& file_name);

// A workers file (models[].workers_from.file): a YAML or JSON sequence of
// workers as in `workers` (or a mapping with a `workers:` sequence), ids
// and URLs unique. Empty text or an empty sequence is an empty list.
using WorkerListResult = Result<std::vector<WorkerOptions>, std::vector<Problem>>;
WorkerListResult load_worker_list(const std::string& text, const std::string& file_name);

}  // namespace kvgate::config
