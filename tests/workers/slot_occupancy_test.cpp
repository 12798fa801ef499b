#include "kvgate/workers/slot_occupancy.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <thread>
#include <vector>

namespace kvgate::workers {
namespace {

std::vector<double> held(const SlotOccupancy& occupancy, std::uint64_t now_ms, std::uint32_t* waiting = nullptr) {
  std::array<double, SlotOccupancy::kCapacity> out{};
  const auto snapshot = occupancy.read(now_ms, out);
  if (waiting != nullptr) {
    *waiting = snapshot.waiting;
  }
  std::vector<double> running(out.begin(), out.begin() + static_cast<std::ptrdiff_t>(snapshot.running));
  std::sort(running.begin(), running.end());
  return running;
}

// Two slots: the first two requests hold one from their dispatch, the next
// two are deferred and take the slots as the holders end, oldest first.
TEST(SlotOccupancy, DeferredRequestsTakeFreedSlotsInArrivalOrder) {
  SlotOccupancy occupancy;
  const auto first = occupancy.admit(1'000, 2);
  const auto second = occupancy.admit(1'100, 2);
  const auto third = occupancy.admit(1'200, 2);
  const auto fourth = occupancy.admit(1'300, 2);
  std::uint32_t waiting = 0;
  EXPECT_EQ(held(occupancy, 1'500, &waiting), (std::vector<double>{400, 500}));
  EXPECT_EQ(waiting, 2u);
  // The first ends after 900 ms in its slot, which it found free; the
  // third (deferred first) takes it.
  EXPECT_EQ(occupancy.release(first, 1'900), (SlotOccupancy::Times{900, 0}));
  EXPECT_EQ(held(occupancy, 2'000, &waiting), (std::vector<double>{100, 900}));
  EXPECT_EQ(waiting, 1u);
  // A deferred request that leaves before it got a slot frees none.
  EXPECT_EQ(occupancy.release(fourth, 2'000), SlotOccupancy::Times{});
  EXPECT_EQ(held(occupancy, 2'000, &waiting).size(), 2u);
  EXPECT_EQ(waiting, 0u);
  // The third held its slot from the release that freed it, and waited
  // for it from its dispatch to that release.
  EXPECT_EQ(occupancy.release(third, 2'400), (SlotOccupancy::Times{500, 700}));
  EXPECT_EQ(occupancy.release(second, 2'500), (SlotOccupancy::Times{1'400, 0}));
  EXPECT_TRUE(held(occupancy, 2'500, &waiting).empty());
  EXPECT_EQ(waiting, 0u);
}

// A deferred request whose first token came holds a slot by then, though
// no tracked release freed one (another client's request ended).
TEST(SlotOccupancy, AFirstTokenStartsADeferredRequestsHold) {
  SlotOccupancy occupancy;
  const auto holder = occupancy.admit(0, 1);
  const auto deferred = occupancy.admit(10, 1);
  std::uint32_t waiting = 0;
  EXPECT_EQ(held(occupancy, 100, &waiting), (std::vector<double>{100}));
  EXPECT_EQ(waiting, 1u);
  occupancy.started(deferred, 60);
  occupancy.started(holder, 80);  // already holding: unchanged
  EXPECT_EQ(held(occupancy, 100, &waiting), (std::vector<double>{40, 100}));
  EXPECT_EQ(waiting, 0u);
  // Its wait ended at a release the gateway did not see: not measured.
  EXPECT_EQ(occupancy.release(deferred, 200), (SlotOccupancy::Times{140, std::nullopt}));
}

TEST(SlotOccupancy, NoSlotsOrAFullTableIsUntracked) {
  SlotOccupancy occupancy;
  EXPECT_EQ(occupancy.admit(0, 0), SlotOccupancy::kUntracked);
  for (std::size_t request = 0; request < SlotOccupancy::kCapacity; ++request) {
    EXPECT_NE(occupancy.admit(request, 4), SlotOccupancy::kUntracked);
  }
  EXPECT_EQ(occupancy.admit(100, 4), SlotOccupancy::kUntracked);
  EXPECT_EQ(occupancy.release(SlotOccupancy::kUntracked, 200), SlotOccupancy::Times{});
  occupancy.started(SlotOccupancy::kUntracked, 200);
  std::uint32_t waiting = 0;
  EXPECT_EQ(held(occupancy, 1'000, &waiting).size(), 4u);
  EXPECT_EQ(waiting, SlotOccupancy::kCapacity - 4);
}

// Threads admitting and releasing their own requests at once (run under
// ThreadSanitizer in the test command): when all have ended, nothing is
// left running or waiting, and an entry is never given to two requests.
TEST(SlotOccupancy, ConcurrentRequestsLeaveNothingBehind) {
  SlotOccupancy occupancy;
  std::vector<std::thread> threads;
  for (int thread = 0; thread < 4; ++thread) {
    threads.emplace_back([&occupancy, thread] {
      for (std::uint64_t request = 0; request < 2'000; ++request) {
        const std::uint64_t now = request * 4 + static_cast<std::uint64_t>(thread);
        const auto entry = occupancy.admit(now, 3);
        std::array<double, 8> out{};
        static_cast<void>(occupancy.read(now, out));
        if (request % 3 == 0) {
          occupancy.started(entry, now + 1);
        }
        static_cast<void>(occupancy.release(entry, now + 2));
      }
    });
  }
  for (auto& thread : threads) {
    thread.join();
  }
  std::uint32_t waiting = 0;
  EXPECT_TRUE(held(occupancy, 1'000'000, &waiting).empty());
  EXPECT_EQ(waiting, 0u);
}

}  // namespace
}  // namespace kvgate::workers
