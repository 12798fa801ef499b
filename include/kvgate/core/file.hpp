#pragma once
// A whole file's bytes, for the shell's start-up and its timers (config,
// tokenizer folders, key files, discovery's worker lists); never called on
// the request path. The only file I/O in core.
#include <cstddef>
#include <limits>
#include <string>

#include "kvgate/core/result.hpp"

namespace kvgate {

inline constexpr std::size_t kAnyFileSize = std::numeric_limits<std::size_t>::max();

enum class FileFailure { cannot_open, is_a_directory, read_failed, too_large };

struct FileError {
  FileFailure failure;
  std::string message;  // names the path: "PATH: cannot be opened"
};

// The file's bytes, or why not. Read in bounded chunks, so a file holding
// more than `max_bytes` (or a device such as /dev/zero) ends in too_large
// instead of filling memory or hanging.
Result<std::string, FileError> read_whole_file(const std::string& path, std::size_t max_bytes = kAnyFileSize);

}  // namespace kvgate
