// The peer table: live peers' counts are summed per worker; a silent peer
// stops counting and is named once per silence.
#include "kvgate/cluster/peer_table.hpp"

#include <gtest/gtest.h>

namespace kvgate::cluster {
namespace {

TEST(PeerTable, SumsTheLivePeersCountsPerWorker) {
  PeerTable table(1'000);
  table.report_load("a", LoadMessage{{{"w0", 2, 100, 1, 500}, {"w1", 1, 0, 0, 50}}}, 10);
  table.report_load("b", LoadMessage{{{"w0", 3, 40, 2, 70}}}, 20);
  auto sums = table.sums(30);
  EXPECT_EQ(sums.at("w0"), (workers::LoadCounters::PeerCounts{5, 140, 3, 570}));
  EXPECT_EQ(sums.at("w1"), (workers::LoadCounters::PeerCounts{1, 0, 0, 50}));
  // A newer report replaces the last one, it does not add to it.
  table.report_load("a", LoadMessage{{{"w0", 0, 0, 0, 0}}}, 40);
  sums = table.sums(50);
  EXPECT_EQ(sums.at("w0").in_flight, 3u);
  EXPECT_FALSE(sums.contains("w1"));
  EXPECT_EQ(table.live(50), 2u);
}

TEST(PeerTable, ASilentPeerStopsCountingAndIsNamedOnce) {
  PeerTable table(1'000);
  table.report_load("a", LoadMessage{{{"w0", 4, 0, 0, 0}}}, 0);
  table.heard("b", 500, 2);
  EXPECT_TRUE(table.newly_silent(900).empty());
  EXPECT_EQ(table.sums(1'000).at("w0").in_flight, 4u);
  EXPECT_EQ(table.newly_silent(1'001), std::vector<std::string>{"a"});
  EXPECT_TRUE(table.newly_silent(1'200).empty());  // named once
  EXPECT_TRUE(table.sums(1'001).empty());
  const auto status = table.status(1'001);
  ASSERT_EQ(status.size(), 2u);
  EXPECT_FALSE(status[0].live);
  EXPECT_EQ(status[0].in_flight, 0u);
  EXPECT_TRUE(status[1].live);
  EXPECT_EQ(status[1].last_lag_ms, 2);
  // Heard again: live, and named again at its next silence ("b" has
  // been silent since 1'500 and was named then).
  EXPECT_EQ(table.newly_silent(1'600), std::vector<std::string>{"b"});
  table.heard("a", 2'000, 1);
  EXPECT_EQ(table.live(2'000), 1u);
  EXPECT_EQ(table.newly_silent(3'600), std::vector<std::string>{"a"});
}

}  // namespace
}  // namespace kvgate::cluster
