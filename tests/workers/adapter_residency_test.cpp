#include "kvgate/workers/adapter_residency.hpp"

#include <gtest/gtest.h>

namespace kvgate::workers {
namespace {

using policy::AdapterState;

// With two LoRA slots the engine holds the two adapters routed there most
// recently; a third is loadable only while a slot is free.
TEST(AdapterResidency, TheMostRecentlyRoutedAdaptersAreHeldUpToTheSlots) {
  AdapterResidency residency;
  const std::uint64_t hashes[] = {adapter_hash("a"), adapter_hash("b"), adapter_hash("c")};
  EXPECT_EQ(residency.state(0, hashes[0], 3, 2), AdapterState::loadable);
  residency.routed(0, 100);
  EXPECT_EQ(residency.state(0, hashes[0], 3, 2), AdapterState::resident);
  EXPECT_EQ(residency.state(1, hashes[1], 3, 2), AdapterState::loadable);
  residency.routed(1, 200);
  EXPECT_EQ(residency.state(2, hashes[2], 3, 2), AdapterState::evicts);
  residency.routed(2, 300);  // the engine unloads a, the least recently used
  EXPECT_EQ(residency.state(0, hashes[0], 3, 2), AdapterState::evicts);
  EXPECT_EQ(residency.state(1, hashes[1], 3, 2), AdapterState::resident);
  EXPECT_EQ(residency.state(2, hashes[2], 3, 2), AdapterState::resident);
}

// The engine's own report wins: what runs is held, what waits is loading,
// and its max_lora replaces the configured one.
TEST(AdapterResidency, TheEnginesReportWins) {
  AdapterResidency residency;
  const std::uint64_t a = adapter_hash("a");
  const std::uint64_t b = adapter_hash("b");
  const std::uint64_t c = adapter_hash("c");
  std::uint64_t running[] = {a};
  std::uint64_t waiting[] = {b};
  residency.publish_report(running, waiting, 1);
  EXPECT_EQ(residency.state(0, a, 3, 4), AdapterState::resident);
  EXPECT_EQ(residency.state(1, b, 3, 4), AdapterState::waiting);
  // One slot, taken by a: c evicts although four were configured.
  EXPECT_EQ(residency.state(2, c, 3, 4), AdapterState::evicts);
  EXPECT_EQ(residency.reported_max_loras(), 1u);
}

}  // namespace
}  // namespace kvgate::workers
