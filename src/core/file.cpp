#include "kvgate/core/file.hpp"

#include <algorithm>
#include <filesystem>
#include <fstream>

namespace kvgate {

Result<std::string, FileError> read_whole_file(const std::string& path, std::size_t max_bytes) {
  std::error_code error;
  if (std::filesystem::is_directory(path, error)) {
    return unexpected(FileError{FileFailure::is_a_directory, path + ": is a directory, not a file"});
  }
  std::ifstream file(path, std::ios::binary);
  if (!file) {
    return unexpected(FileError{FileFailure::cannot_open, path + ": cannot be opened"});
  }
  // Chunks of 64 KiB: a regular file's size is known, a pipe's or a
  // device's is not, and both must stop at max_bytes + 1.
  constexpr std::size_t kChunk = std::size_t{64} << 10;
  std::string contents;
  while (true) {
    const std::size_t room = max_bytes == kAnyFileSize ? kChunk : std::min(kChunk, max_bytes + 1 - contents.size());
    const std::size_t used = contents.size();
    contents.resize(used + room);
    file.read(contents.data() + used, static_cast<std::streamsize>(room));
    contents.resize(used + static_cast<std::size_t>(file.gcount()));
    if (file.bad()) {
      return unexpected(FileError{FileFailure::read_failed, path + ": could not be read"});
    }
    if (contents.size() > max_bytes) {
      return unexpected(
          FileError{FileFailure::too_large, path + ": larger than " + std::to_string(max_bytes) + " bytes"});
    }
    if (file.eof()) {
      return contents;
    }
  }
}

}  // namespace kvgate
