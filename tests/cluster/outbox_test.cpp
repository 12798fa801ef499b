// The outbox: bounded (a full queue refuses, never waits), buffers reused,
// and every message pushed by concurrent producers is taken exactly once.
#include "kvgate/cluster/outbox.hpp"

#include <gtest/gtest.h>

#include <set>
#include <thread>

namespace kvgate::cluster {
namespace {

using namespace std::chrono_literals;

TEST(Outbox, AFullQueueRefusesInsteadOfWaiting) {
  Outbox outbox(2);
  EXPECT_TRUE(outbox.push([](std::string& out) { out = "one"; }));
  EXPECT_TRUE(outbox.push([](std::string& out) { out = "two"; }));
  EXPECT_FALSE(outbox.push([](std::string& out) { out = "three"; }));
  std::vector<std::uint32_t> slots;
  slots.reserve(2);
  outbox.take(slots, 0ms);
  ASSERT_EQ(slots.size(), 2u);
  EXPECT_EQ(outbox.buffer(slots[0]), "one");
  EXPECT_EQ(outbox.buffer(slots[1]), "two");
  outbox.give_back(slots);
  EXPECT_TRUE(outbox.push([](std::string& out) { out += "again"; }));  // a cleared buffer
  outbox.take(slots, 0ms);
  ASSERT_EQ(slots.size(), 1u);
  EXPECT_EQ(outbox.buffer(slots[0]), "again");
}

// A batch the engine did not confirm goes out again first, in order.
TEST(Outbox, RequeuedBuffersComeBackFirstInOrder) {
  Outbox outbox(4);
  for (const char* text : {"a", "b", "c"}) {
    ASSERT_TRUE(outbox.push([&](std::string& out) { out = text; }));
  }
  std::vector<std::uint32_t> slots;
  slots.reserve(4);
  outbox.take(slots, 0ms);
  ASSERT_EQ(slots.size(), 3u);
  ASSERT_TRUE(outbox.push([](std::string& out) { out = "d"; }));
  // "a" was confirmed; "b" and "c" were not.
  outbox.requeue(std::span(slots).subspan(1));
  slots.resize(1);
  outbox.give_back(slots);
  outbox.take(slots, 0ms);
  std::vector<std::string> order;
  for (auto slot : slots) {
    order.push_back(outbox.buffer(slot));
  }
  EXPECT_EQ(order, (std::vector<std::string>{"b", "c", "d"}));
}

TEST(Outbox, ConcurrentProducersLoseNothingThatWasAccepted) {
  Outbox outbox(64);
  constexpr int kPerThread = 5'000;
  std::atomic<int> accepted{0};
  std::vector<std::thread> producers;
  for (int thread = 0; thread < 3; ++thread) {
    producers.emplace_back([&, thread] {
      for (int index = 0; index < kPerThread; ++index) {
        if (outbox.push([&](std::string& out) { out = std::to_string(thread * kPerThread + index); })) {
          accepted.fetch_add(1);
        }
      }
    });
  }
  std::set<std::string> taken;
  std::vector<std::uint32_t> slots;
  slots.reserve(64);
  std::atomic<bool> done{false};
  std::thread finisher([&] {
    for (auto& producer : producers) {
      producer.join();
    }
    done = true;
    outbox.interrupt();
  });
  while (true) {
    const bool last = done.load();
    outbox.take(slots, 5ms);
    for (auto slot : slots) {
      EXPECT_TRUE(taken.insert(outbox.buffer(slot)).second);
    }
    outbox.give_back(slots);
    if (last && slots.empty() && outbox.waiting() == 0) {
      break;
    }
  }
  finisher.join();
  EXPECT_EQ(static_cast<int>(taken.size()), accepted.load());
  EXPECT_GT(accepted.load(), 0);
}

}  // namespace
}  // namespace kvgate::cluster
