#include "kvgate/core/published.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

namespace kvgate {
namespace {

// A snapshot whose fields must agree: a torn or freed one shows.
struct Snapshot {
  explicit Snapshot(int value) : a(value), b(value) {}
  int a;
  int b;
};

TEST(Published, AReaderSeesTheLatestStoreAndKeepsItsSnapshotAlive) {
  Published<const Snapshot> published(std::make_shared<const Snapshot>(1));
  Published<const Snapshot>::Reader reader(published);
  auto held = reader.current();
  EXPECT_EQ(held->a, 1);
  published.store(std::make_shared<const Snapshot>(2));
  EXPECT_EQ(reader.current()->a, 2);
  EXPECT_EQ(held->a, 1);  // still valid: the reader's caller holds it
  EXPECT_EQ(published.load()->b, 2);
}

TEST(Published, AnEmptyValueIsReadAsEmpty) {
  Published<int> published;
  Published<int>::Reader reader(published);
  EXPECT_EQ(reader.current(), nullptr);
  published.store(std::make_shared<int>(7));
  EXPECT_EQ(*reader.current(), 7);
}

// Readers on several threads while one thread replaces the value: each
// read is a whole snapshot and no value ever goes backwards (ThreadSanitizer
// runs this in the test command).
TEST(Published, ThreadsReadWholeSnapshotsWhileOneReplacesThem) {
  Published<const Snapshot> published(std::make_shared<const Snapshot>(0));
  std::atomic<bool> done{false};
  std::atomic<int> torn{0};
  std::vector<std::thread> readers;
  for (int thread = 0; thread < 3; ++thread) {
    readers.emplace_back([&, thread] {
      Published<const Snapshot>::Reader reader(published);
      int last = 0;
      while (!done.load(std::memory_order_acquire)) {
        const auto snapshot = thread == 0 ? published.load() : reader.current();
        if (snapshot->a != snapshot->b || snapshot->a < last) {
          torn.fetch_add(1);
        }
        last = snapshot->a;
      }
    });
  }
  for (int value = 1; value <= 20'000; ++value) {
    published.store(std::make_shared<const Snapshot>(value));
  }
  done.store(true, std::memory_order_release);
  for (auto& reader : readers) {
    reader.join();
  }
  EXPECT_EQ(torn.load(), 0);
}

}  // namespace
}  // namespace kvgate
