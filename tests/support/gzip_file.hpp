#pragma once
// Reads a gzip-compressed file whole (the committed golden files), for tests.
#include <zlib.h>

#include <string>

namespace kvgate::test_support {

// Empty when the file cannot be opened (the caller's size checks then fail).
inline std::string read_gzip_file(const std::string& path) {
  gzFile file = gzopen(path.c_str(), "rb");
  if (file == nullptr) return {};
  std::string text;
  char buffer[1 << 16];
  for (int read = 0; (read = gzread(file, buffer, sizeof buffer)) > 0;)
    text.append(buffer, static_cast<std::size_t>(read));
  gzclose(file);
  return text;
}

}  // namespace kvgate::test_support
