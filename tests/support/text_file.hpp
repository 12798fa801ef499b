#pragma once
// Reads a text file whole (shipped files the tests hold the code to).
#include <fstream>
#include <sstream>
#include <string>

namespace kvgate::test_support {

// Empty when the file cannot be opened (the caller's comparison then fails).
inline std::string read_text_file(const std::string& path) {
  std::ifstream file(path);
  std::stringstream text;
  text << file.rdbuf();
  return text.str();
}

}  // namespace kvgate::test_support
