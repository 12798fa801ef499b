#include "kvgate/core/trace_context.hpp"

#include <gtest/gtest.h>

#include <string>

namespace kvgate {
namespace {

TEST(TraceParent, ReadsTheSpecsExample) {
  auto context = parse_traceparent("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01");
  ASSERT_TRUE(context);
  EXPECT_EQ(context->trace_id_view(), "4bf92f3577b34da6a3ce929d0e0e4736");
  EXPECT_EQ(std::string(context->parent_id.data(), 16), "00f067aa0ba902b7");
  EXPECT_TRUE(context->sampled);
  EXPECT_FALSE(parse_traceparent("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00")->sampled);
}

TEST(TraceParent, ALaterVersionMayAddFieldsVersion00MayNot) {
  EXPECT_TRUE(parse_traceparent("01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra"));
  EXPECT_FALSE(parse_traceparent("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra"));
  EXPECT_FALSE(parse_traceparent("01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01x"));
}

TEST(TraceParent, RefusesWhatTheSpecCallsInvalid) {
  for (const char* bad : {
           "",
           "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7",        // no flags
           "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",     // version ff
           "00-00000000000000000000000000000000-00f067aa0ba902b7-01",     // zero trace id
           "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",     // zero parent id
           "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",     // upper case
           "00_4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",     // separator
           "00-4bf92f3577b34da6a3ce929d0e0e473g-00f067aa0ba902b7-01",     // not hex
           "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-0\xff",  // a byte beyond ASCII
       }) {
    EXPECT_FALSE(parse_traceparent(bad)) << bad;
  }
}

}  // namespace
}  // namespace kvgate
