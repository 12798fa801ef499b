#include "msgpack_writer.hpp"

#include <bit>
#include <cstring>

namespace kvgate::sim {

void MsgpackWriter::big_endian(std::uint64_t value, int bytes) {
  for (int shift = (bytes - 1) * 8; shift >= 0; shift -= 8) {
    out_.push_back(static_cast<char>((value >> shift) & 0xff));
  }
}

void MsgpackWriter::unsigned_integer(std::uint64_t value) {
  if (value < 0x80) {
    out_.push_back(static_cast<char>(value));
  } else if (value <= 0xff) {
    out_.push_back(static_cast<char>(0xcc));
    big_endian(value, 1);
  } else if (value <= 0xffff) {
    out_.push_back(static_cast<char>(0xcd));
    big_endian(value, 2);
  } else if (value <= 0xffffffff) {
    out_.push_back(static_cast<char>(0xce));
    big_endian(value, 4);
  } else {
    out_.push_back(static_cast<char>(0xcf));
    big_endian(value, 8);
  }
}

void MsgpackWriter::signed_integer(std::int64_t value) {
  if (value >= 0) {
    unsigned_integer(static_cast<std::uint64_t>(value));
  } else if (value >= -32) {
    out_.push_back(static_cast<char>(value));
  } else if (value >= INT8_MIN) {
    out_.push_back(static_cast<char>(0xd0));
    big_endian(static_cast<std::uint64_t>(value), 1);
  } else if (value >= INT16_MIN) {
    out_.push_back(static_cast<char>(0xd1));
    big_endian(static_cast<std::uint64_t>(value), 2);
  } else if (value >= INT32_MIN) {
    out_.push_back(static_cast<char>(0xd2));
    big_endian(static_cast<std::uint64_t>(value), 4);
  } else {
    out_.push_back(static_cast<char>(0xd3));
    big_endian(static_cast<std::uint64_t>(value), 8);
  }
}

void MsgpackWriter::float64(double value) {
  out_.push_back(static_cast<char>(0xcb));
  big_endian(std::bit_cast<std::uint64_t>(value), 8);
}

void MsgpackWriter::string(std::string_view value) {
  auto size = value.size();
  if (size < 32) {
    out_.push_back(static_cast<char>(0xa0 | size));
  } else if (size <= 0xff) {
    out_.push_back(static_cast<char>(0xd9));
    big_endian(size, 1);
  } else if (size <= 0xffff) {
    out_.push_back(static_cast<char>(0xda));
    big_endian(size, 2);
  } else {
    out_.push_back(static_cast<char>(0xdb));
    big_endian(size, 4);
  }
  out_.append(value);
}

void MsgpackWriter::array_header(std::uint32_t size) {
  if (size < 16) {
    out_.push_back(static_cast<char>(0x90 | size));
  } else if (size <= 0xffff) {
    out_.push_back(static_cast<char>(0xdc));
    big_endian(size, 2);
  } else {
    out_.push_back(static_cast<char>(0xdd));
    big_endian(size, 4);
  }
}

void MsgpackWriter::map_header(std::uint32_t size) {
  if (size < 16) {
    out_.push_back(static_cast<char>(0x80 | size));
  } else if (size <= 0xffff) {
    out_.push_back(static_cast<char>(0xde));
    big_endian(size, 2);
  } else {
    out_.push_back(static_cast<char>(0xdf));
    big_endian(size, 4);
  }
}

}  // namespace kvgate::sim
