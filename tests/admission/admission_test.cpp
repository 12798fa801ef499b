#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "kvgate/admission/fair_queue.hpp"
#include "kvgate/admission/token_bucket.hpp"

namespace kvgate::admission {
namespace {

TEST(TokenBucket, AMinutesAllowanceThenTheRefillRate) {
  TokenBucket bucket(60, 0);  // one per second
  for (int request = 0; request < 60; ++request) {
    EXPECT_EQ(bucket.try_take(1, 0), 0u) << request;
  }
  EXPECT_EQ(bucket.try_take(1, 0), 1'000u);  // a whole request's worth of refill
  EXPECT_EQ(bucket.try_take(1, 500), 500u);  // half of it there: half a second to go
  EXPECT_EQ(bucket.try_take(1, 999), 1u);
  EXPECT_EQ(bucket.try_take(1, 1'000), 0u);
  EXPECT_EQ(bucket.try_take(1, 1'001), 999u);
  // Never above a minute's allowance, however long it rests.
  EXPECT_DOUBLE_EQ(bucket.level(10'000'000), 60);
}

TEST(TokenBucket, AnOversizedRequestGoesAloneThenPaysItsDebt) {
  TokenBucket bucket(1'000, 0);
  EXPECT_EQ(bucket.try_take(5'000, 0), 0u);  // larger than a minute's allowance: admitted, alone
  EXPECT_DOUBLE_EQ(bucket.level(0), -4'000);
  // 4,000 tokens of debt at 1,000 a minute, and one more token: four
  // minutes and 60 ms.
  EXPECT_EQ(bucket.wait_ms(0), 240'060u);
  EXPECT_EQ(bucket.try_take(1, 120'000), 120'060u);
  EXPECT_EQ(bucket.try_take(1, 240'060), 0u);
}

TEST(TokenBucket, AnAllowanceBelowOneUnitStillAdmits) {
  TokenBucket bucket(0.5, 0);  // one request every two minutes
  EXPECT_EQ(bucket.try_take(1, 0), 0u);
  EXPECT_EQ(bucket.try_take(1, 60'000), 60'000u);
  EXPECT_EQ(bucket.try_take(1, 120'000), 0u);
}

TEST(TokenBucket, AReloadKeepsTheLevelCappedAtTheNewAllowance) {
  TokenBucket bucket(100, 0);
  bucket.take(30, 0);
  bucket.set_per_minute(50);
  EXPECT_DOUBLE_EQ(bucket.level(0), 50);
  bucket.set_per_minute(1'000);
  EXPECT_DOUBLE_EQ(bucket.level(0), 50);
}

std::string drain(FairQueue<std::string>& queue) {
  std::string order;
  while (auto item = queue.pop()) {
    order += *item;
  }
  return order;
}

TEST(FairQueue, ABurstDoesNotStarveAnotherTenant) {
  FairQueue<std::string> queue({1, 1});
  for (const auto* item : {"a", "a", "a", "a", "a"}) {
    queue.push(0, item);
  }
  queue.push(1, "b");
  EXPECT_EQ(queue.size(), 6u);
  EXPECT_EQ(drain(queue), "abaaaa");
  EXPECT_TRUE(queue.empty());
}

TEST(FairQueue, WeightsShareTheServiceInProportion) {
  FairQueue<std::string> queue({2, 1, 0.5});
  for (int index = 0; index < 12; ++index) {
    queue.push(0, "a");
    queue.push(1, "b");
    queue.push(2, "c");
  }
  const auto order = drain(queue).substr(0, 14);
  // Per round of the smallest weight's one: c once, b twice, a four times.
  EXPECT_EQ(std::count(order.begin(), order.end(), 'a'), 8) << order;
  EXPECT_EQ(std::count(order.begin(), order.end(), 'b'), 4) << order;
  EXPECT_EQ(std::count(order.begin(), order.end(), 'c'), 2) << order;
}

TEST(FairQueue, AHeadThatMayNotGoKeepsItsPlaceWhileOthersGo) {
  FairQueue<std::string> queue({1, 1});
  queue.push(0, "x1");
  queue.push(0, "x2");
  queue.push(1, "y1");
  auto not_x = [](const std::string& item) { return item[0] != 'x'; };
  EXPECT_EQ(queue.pop(not_x), "y1");
  EXPECT_EQ(queue.pop(not_x), std::nullopt);  // only x waits, and x may not go
  EXPECT_EQ(queue.size(), 2u);
  EXPECT_EQ(queue.pop(), "x1");  // in its own order once it may
  EXPECT_EQ(queue.pop(), "x2");
}

// An item something was kept for (a slot held for its session's turn)
// leaves out of turn, from behind a head that may not go; the rest keep
// their order.
TEST(FairQueue, AnItemTakenOutOfTurnLeavesTheOthersInOrder) {
  FairQueue<std::string> queue({1, 1});
  queue.push(0, "x1");
  queue.push(0, "kept");
  queue.push(0, "x2");
  queue.push(1, "y1");
  EXPECT_EQ(queue.take_first([](const std::string& item) { return item == "kept"; }), "kept");
  EXPECT_EQ(queue.take_first([](const std::string& item) { return item == "kept"; }), std::nullopt);
  EXPECT_EQ(queue.size(), 3u);
  EXPECT_EQ(queue.pop(), "x1");
  EXPECT_EQ(queue.pop(), "y1");
  EXPECT_EQ(queue.pop(), "x2");
  queue.push(1, "only");
  EXPECT_EQ(queue.take_first([](const std::string&) { return true; }), "only");
  EXPECT_TRUE(queue.empty());
  EXPECT_EQ(queue.pop(), std::nullopt);
}

TEST(FairQueue, DroppedItemsAreSkippedAndSweptAway) {
  FairQueue<std::string> queue({1, 1});
  queue.push(0, "gone");
  queue.push(0, "a");
  queue.push(1, "gone");
  queue.push(1, "b");
  auto gone = [](const std::string& item) { return item == "gone"; };
  EXPECT_EQ(queue.pop([](const std::string&) { return true; }, gone), "a");
  EXPECT_EQ(queue.remove_if(gone), 1u);
  EXPECT_EQ(queue.size(), 1u);
  EXPECT_EQ(queue.pop(), "b");
  EXPECT_TRUE(queue.empty());
}

TEST(FairQueue, LanesAddedByAReloadStartEmpty) {
  FairQueue<std::string> queue({1});
  queue.push(0, "a");
  queue.set_weights({1, 3});
  queue.push(1, "b");
  queue.push(1, "b");
  queue.push(0, "a");
  EXPECT_EQ(drain(queue), "abba");
}

}  // namespace
}  // namespace kvgate::admission
