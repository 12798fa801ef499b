#pragma once
// A MessagePack writer that encodes exactly as Python's msgspec does for the
// types vLLM's KV events use: integers in their smallest form, floats always
// as float64, str/array/map with the shortest length prefix, nil. Byte-exact
// output matters: the simulator claims wire compatibility with vLLM.
#include <cstdint>
#include <string>
#include <string_view>

namespace kvgate::sim {

class MsgpackWriter {
 public:
  void nil() { out_.push_back(static_cast<char>(0xc0)); }
  void boolean(bool value) { out_.push_back(static_cast<char>(value ? 0xc3 : 0xc2)); }
  void unsigned_integer(std::uint64_t value);
  void signed_integer(std::int64_t value);
  void float64(double value);
  void string(std::string_view value);
  void array_header(std::uint32_t size);
  void map_header(std::uint32_t size);
  void raw(std::string_view bytes) { out_.append(bytes); }

  [[nodiscard]] const std::string& bytes() const { return out_; }
  std::string take() { return std::move(out_); }

 private:
  void big_endian(std::uint64_t value, int bytes);
  std::string out_;
};

}  // namespace kvgate::sim
