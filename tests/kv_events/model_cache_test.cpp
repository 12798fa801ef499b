#include "kvgate/kv_events/model_cache.hpp"

#include <gtest/gtest.h>

namespace kvgate::kv_events {
namespace {

config::ModelOptions model(const std::string& name, std::size_t workers, std::uint32_t block_size = 16,
                           std::size_t first = 0) {
  config::ModelOptions options{name, "", block_size, {}};
  for (std::size_t index = first; index < first + workers; ++index) {
    options.workers.push_back({"w" + std::to_string(index), "http://127.0.0.1:1"});
  }
  return options;
}

config::IndexOptions cap(std::uint32_t max_entries) {
  config::IndexOptions options;
  options.max_entries = max_entries;
  return options;
}

TEST(CacheRegistry, AWorkerKeepsItsSlotAndRemovedSlotsAreNotReused) {
  CacheRegistry registry;
  auto first = registry.assign({model("m", 3)}, cap(100));
  ASSERT_TRUE(first);
  EXPECT_EQ((*first)[0].slots, (std::vector<WorkerSlot>{0, 1, 2}));
  // w0 leaves, w3 joins: w1 and w2 keep theirs, w3 gets a fresh one.
  auto second = registry.assign({model("m", 3, 16, 1)}, cap(100));
  ASSERT_TRUE(second);
  EXPECT_EQ((*second)[0].slots, (std::vector<WorkerSlot>{1, 2, 3}));
  EXPECT_EQ((*second)[0].cache, (*first)[0].cache);
}

TEST(CacheRegistry, ANewBlockSizeGetsAFreshIndex) {
  CacheRegistry registry;
  auto first = registry.assign({model("m", 1, 16)}, cap(100));
  auto second = registry.assign({model("m", 1, 32)}, cap(100));
  ASSERT_TRUE(first && second);
  EXPECT_NE((*second)[0].cache, (*first)[0].cache);
  EXPECT_EQ((*second)[0].cache->block_size, 32u);
}

TEST(CacheRegistry, ARejectedAssignmentChangesNothing) {
  CacheRegistry registry;
  const auto fits = index::kMaxWorkers - 4;
  auto first = registry.assign({model("a", 1), model("b", fits)}, cap(100));
  ASSERT_TRUE(first);
  // "a" would gain worker "x" and a smaller cap, but "b" needs more slots
  // than its index has left (slots of removed workers are not reused).
  auto grown = model("a", 1);
  grown.workers.push_back({"x", "http://127.0.0.1:1"});
  auto rejected = registry.assign({grown, model("b", 10, 16, fits)}, cap(50));
  ASSERT_FALSE(rejected);
  EXPECT_NE(rejected.error().find("'b'"), std::string::npos) << rejected.error();
  EXPECT_EQ((*first)[0].cache->index.max_entries(), 100u);
  // The slot "x" would have taken is still free.
  auto after = registry.assign({model("a", 2), model("b", fits)}, cap(100));
  ASSERT_TRUE(after);
  EXPECT_EQ((*after)[0].slots, (std::vector<WorkerSlot>{0, 1}));
  EXPECT_EQ((*after)[0].cache, (*first)[0].cache);
}

}  // namespace
}  // namespace kvgate::kv_events
