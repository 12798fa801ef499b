#include "kvgate/obs/recent_activity.hpp"

#include <gtest/gtest.h>

#include <string>

namespace kvgate::obs {
namespace {

RoutedRequest routed(std::uint64_t unix_ms, std::string_view id, std::optional<std::uint32_t> prompt,
                     std::optional<std::uint32_t> cached) {
  RoutedRequest request;
  request.unix_ms = unix_ms;
  request.request_id.assign(id);
  request.worker.assign("w1");
  request.prompt_tokens = prompt;
  request.cached_tokens = cached;
  request.status = 200;
  return request;
}

TEST(RecentActivity, KeepsTheNewestRequestsFirstAndForgetsTheOldestBeyondTheRing) {
  RecentActivity activity(1'000);
  const std::size_t total = RecentActivity::kDecisionsKept + 5;
  for (std::size_t at = 0; at < total; ++at) {
    activity.record(routed(1'000'000 + at, "r" + std::to_string(at), 100, 50));
  }
  auto three = activity.recent(3);
  ASSERT_EQ(three.size(), 3U);
  EXPECT_EQ(three[0].request_id.view(), "r" + std::to_string(total - 1));
  EXPECT_EQ(three[2].request_id.view(), "r" + std::to_string(total - 3));
  auto all = activity.recent(1'000);
  ASSERT_EQ(all.size(), RecentActivity::kDecisionsKept);
  EXPECT_EQ(all.back().request_id.view(), "r5");
}

TEST(RecentActivity, BucketsAddTheEnginesFiguresAndSkipRequestsWithoutUsage) {
  RecentActivity activity(10'000);
  const std::uint64_t t0 = 1'700'000'000'000;  // a bucket boundary
  activity.record(routed(t0 + 1, "a", 1'000, 600));
  activity.record(routed(t0 + 9'999, "b", 500, 900));  // more cached than sent: capped at the prompt
  activity.record(routed(t0 + 5, "c", std::nullopt, std::nullopt));
  activity.record(routed(t0 + 10'000, "d", 200, 0));
  auto buckets = activity.hit_buckets(t0 + 15'000);
  ASSERT_EQ(buckets.size(), RecentActivity::kBuckets);
  const auto& previous = buckets[buckets.size() - 2];
  EXPECT_EQ(previous.start_unix_ms, t0);
  EXPECT_EQ(previous.requests, 2U);
  EXPECT_EQ(previous.prompt_tokens, 1'500U);
  EXPECT_EQ(previous.cached_tokens, 1'100U);
  EXPECT_EQ(buckets.back().start_unix_ms, t0 + 10'000);
  EXPECT_EQ(buckets.back().prompt_tokens, 200U);
  EXPECT_EQ(buckets.front().requests, 0U);
  EXPECT_EQ(activity.recent(10).size(), 4U);  // the one without usage is still a recent request
}

TEST(RecentActivity, ABucketFromALapAgoIsNotMistakenForNow) {
  RecentActivity activity(1'000);
  const std::uint64_t t0 = 5'000'000;
  activity.record(routed(t0, "old", 100, 100));
  const std::uint64_t lap = RecentActivity::kBuckets * 1'000;
  auto buckets = activity.hit_buckets(t0 + lap);
  for (const auto& bucket : buckets) {
    EXPECT_EQ(bucket.requests, 0U) << bucket.start_unix_ms;
  }
  // A late finisher cannot overwrite a newer bucket in the same slot.
  activity.record(routed(t0 + lap, "new", 10, 5));
  activity.record(routed(t0, "late", 100, 100));
  buckets = activity.hit_buckets(t0 + lap);
  EXPECT_EQ(buckets.back().requests, 1U);
  EXPECT_EQ(buckets.back().prompt_tokens, 10U);
}

TEST(RecentActivity, LongTextIsCutOnACharacterBoundary) {
  ShortText<8> text;
  text.assign("abcdef\xC3\xA9xyz");  // the 7-byte cut would fall inside the é
  EXPECT_EQ(text.view(), "abcdef");
  text.assign("short");
  EXPECT_EQ(text.view(), "short");
}

}  // namespace
}  // namespace kvgate::obs
