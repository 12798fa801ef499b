#include "kvgate/core/units.hpp"

#include <gtest/gtest.h>

namespace kvgate {
namespace {

TEST(ParseWholeNumber, AcceptsDigitsAloneWithin64Bits) {
  EXPECT_EQ(parse_whole_number("0"), 0U);
  EXPECT_EQ(parse_whole_number("200000"), 200000U);
  EXPECT_EQ(parse_whole_number("18446744073709551615"), UINT64_MAX);
  EXPECT_EQ(parse_whole_number("18446744073709551616"), std::nullopt);
  for (const char* text : {"", "-1", "+1", " 1", "1 ", "1.5", "2e5", "max", "12ms"}) {
    EXPECT_EQ(parse_whole_number(text), std::nullopt) << text;
  }
}

TEST(ParseDuration, AcceptsEachUnit) {
  EXPECT_EQ(parse_duration("250ms"), Milliseconds(250));
  EXPECT_EQ(parse_duration("5s"), Milliseconds(5000));
  EXPECT_EQ(parse_duration("2m"), Milliseconds(120'000));
  EXPECT_EQ(parse_duration("1h"), Milliseconds(3'600'000));
  EXPECT_EQ(parse_duration("0s"), Milliseconds(0));
}

TEST(ParseDuration, RejectsWhatIsNotADuration) {
  for (const char* text : {"", "5", "s", "1.5s", "-1s", "5 s", "5sec", "10d", "99999999999999999999s", "1e3ms"}) {
    EXPECT_FALSE(parse_duration(text)) << text;
  }
}

TEST(ParseByteSize, AcceptsBinaryAndDecimalUnits) {
  EXPECT_EQ(parse_byte_size("65536"), 65536u);
  EXPECT_EQ(parse_byte_size("64KiB"), 65536u);
  EXPECT_EQ(parse_byte_size("16MiB"), 16u * 1024 * 1024);
  EXPECT_EQ(parse_byte_size("1GB"), 1'000'000'000u);
  EXPECT_EQ(parse_byte_size("12B"), 12u);
}

TEST(ParseByteSize, RejectsUnknownUnitsAndOverflow) {
  for (const char* text : {"", "MiB", "1.5MiB", "10mib", "1TiB", "-5", "99999999999999999999GiB"}) {
    EXPECT_FALSE(parse_byte_size(text)) << text;
  }
}

TEST(FormatDuration, UsesTheLargestWholeUnit) {
  EXPECT_EQ(format_duration(Milliseconds(1500)), "1500ms");
  EXPECT_EQ(format_duration(Milliseconds(2000)), "2s");
  EXPECT_EQ(format_duration(Milliseconds(120'000)), "2m");
  EXPECT_EQ(format_duration(Milliseconds(7'200'000)), "2h");
  EXPECT_EQ(format_duration(Milliseconds(0)), "0ms");
}

}  // namespace
}  // namespace kvgate
