#include "kvgate/core/file.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

namespace kvgate {
namespace {

class ReadWholeFile : public ::testing::Test {
 protected:
  void SetUp() override {
    folder_ = std::filesystem::temp_directory_path() / ("kvgate-file-test-" + std::to_string(::getpid()));
    std::filesystem::create_directories(folder_);
  }
  void TearDown() override { std::filesystem::remove_all(folder_); }

  std::string write(const std::string& name, const std::string& bytes) {
    const auto path = (folder_ / name).string();
    std::ofstream(path, std::ios::binary) << bytes;
    return path;
  }

  std::filesystem::path folder_;
};

// Longer than one of the reader's chunks, with every byte value (NULs
// and CRs included): nothing is translated or cut.
std::string every_byte(std::size_t length) {
  std::string bytes(length, '\0');
  for (std::size_t at = 0; at < length; ++at) {
    bytes[at] = static_cast<char>(at * 7 % 256);
  }
  return bytes;
}

TEST_F(ReadWholeFile, ReturnsTheBytesAsWritten) {
  for (const std::size_t length : {std::size_t{0}, std::size_t{1}, std::size_t{65536}, std::size_t{200'001}}) {
    const auto bytes = every_byte(length);
    auto read = read_whole_file(write("bytes", bytes));
    ASSERT_TRUE(read) << length << ": " << read.error().message;
    EXPECT_EQ(*read, bytes) << length;
  }
}

TEST_F(ReadWholeFile, AFileOfExactlyTheBoundIsReadAndOneByteMoreIsTooLarge) {
  const auto path = write("bounded", every_byte(4096));
  auto fits = read_whole_file(path, 4096);
  ASSERT_TRUE(fits) << fits.error().message;
  EXPECT_EQ(fits->size(), 4096u);
  auto over = read_whole_file(path, 4095);
  ASSERT_FALSE(over);
  EXPECT_EQ(over.error().failure, FileFailure::too_large);
  EXPECT_EQ(over.error().message, path + ": larger than 4095 bytes");
}

TEST_F(ReadWholeFile, AnEndlessDeviceStopsAtTheBound) {
  auto endless = read_whole_file("/dev/zero", 100'000);
  ASSERT_FALSE(endless);
  EXPECT_EQ(endless.error().failure, FileFailure::too_large);
}

TEST_F(ReadWholeFile, SaysWhyAPathIsNotReadable) {
  auto missing = read_whole_file((folder_ / "absent").string());
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.error().failure, FileFailure::cannot_open);
  EXPECT_EQ(missing.error().message, (folder_ / "absent").string() + ": cannot be opened");
  auto folder = read_whole_file(folder_.string());
  ASSERT_FALSE(folder);
  EXPECT_EQ(folder.error().failure, FileFailure::is_a_directory);
}

}  // namespace
}  // namespace kvgate
