#include "dial.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <numeric>

#include "capacity.hpp"

namespace kvgate::load {
namespace {

// Hand-checked: blocks of 4 bytes; "aaaabbbb" first, then a prompt sharing
// its first block only, then one repeating both blocks and adding a partial
// one.
TEST(Dial, TheCeilingCountsWholeBlocksWhosePrefixWasSentBefore) {
  PrefixCeiling ceiling(4);
  EXPECT_DOUBLE_EQ(ceiling.observe("aaaabbbb"), 0);
  EXPECT_DOUBLE_EQ(ceiling.observe("aaaacccc"), 0.5);
  EXPECT_DOUBLE_EQ(ceiling.observe("aaaabbbbdd"), 0.8);
  // A block equal to a seen one but under another prefix is not reusable.
  EXPECT_DOUBLE_EQ(ceiling.observe("ccccbbbb"), 0);
  EXPECT_DOUBLE_EQ(ceiling.observe(""), 0);
  EXPECT_DOUBLE_EQ(ceiling.observe("abc"), 0);  // shorter than a block
}

TEST(Dial, ChatPrefixTextKeepsMessageBoundaries) {
  EXPECT_NE(chat_prefix_text({{"user", "ab"}, {"user", "c"}}), chat_prefix_text({{"user", "a"}, {"user", "bc"}}));
  auto first = chat_prefix_text({{"system", "s"}, {"user", "q"}});
  auto second = chat_prefix_text({{"system", "s"}, {"user", "q"}, {"assistant", "a"}, {"user", "r"}});
  EXPECT_EQ(second.rfind(first, 0), 0u);
}

// Two sessions of two turns over one shared system prompt; 1-token blocks
// (4 bytes), so every figure can be counted by hand from the texts.
TEST(Dial, OfferedTokensOfASessionWorkload) {
  Workload workload;
  workload.sessions = {{"a", "", {{"", std::string(40, 'x'), 1, 0}, {"", std::string(40, 'y'), 1, 0}}},
                       {"b", "", {{"", std::string(40, 'z'), 1, 0}}}};
  // Recorded prompts are whole texts: turn 2 repeats turn 1 and adds 40 bytes.
  workload.sessions[0].turns[0].prompt = std::string(40, 'x');
  workload.sessions[0].turns[1].prompt = std::string(40, 'x') + std::string(40, 'y');
  workload.sessions[1].turns[0].prompt = std::string(40, 'x');
  auto offered = offered_tokens(workload, 2, 1);
  EXPECT_EQ(offered.requests, 3u);
  EXPECT_DOUBLE_EQ(offered.prompt, 10 + 20 + 10);
  EXPECT_DOUBLE_EQ(offered.ceiling, 10 + 10);  // turn 2's first half, session b's whole prompt
  // Round robin over 2 replicas: requests 0 and 2 land on replica 0, so
  // session b reuses all of session a's first prompt; request 1 lands on
  // replica 1, which has seen nothing.
  EXPECT_DOUBLE_EQ(offered.round_robin, 40 - 10);
  // 30 round-robin tokens over 2 sessions: 15 per session; at 60% of 100
  // tokens/s, 4 sessions per second.
  EXPECT_DOUBLE_EQ(session_rate_for_load(offered, 2, 0.6, 100), 4);
  EXPECT_DOUBLE_EQ(session_rate_for_load(OfferedTokens{}, 2, 0.6, 100), 0);
}

TEST(Dial, ChatSessionsCountTheAnswersTheyWillResend) {
  Workload workload;
  workload.sessions = {{"a", "system!!", {{"hello", "", 5, 0}, {"again", "", 5, 0}}}};
  auto offered = offered_tokens(workload, 1, 16);
  const double first = static_cast<double>(chat_prefix_text({{"system", "system!!"}, {"user", "hello"}}).size());
  // Turn 2 resends turn 1 and a 5-token (20-byte) answer.
  const double second = static_cast<double>(
      chat_prefix_text(
          {{"system", "system!!"}, {"user", "hello"}, {"assistant", std::string(20, '~')}, {"user", "again"}})
          .size());
  EXPECT_DOUBLE_EQ(offered.prompt, (first + second) / kBytesPerToken);
  EXPECT_DOUBLE_EQ(offered.ceiling, 0);  // shorter than one 64-byte block
}

TEST(Dial, ATraceIsSpedUpToTheLoad) {
  Workload workload;
  workload.trace = {{0, std::string(400, 'a'), 1}, {10'000, std::string(400, 'b'), 1}};
  auto offered = offered_tokens(workload, 4, 16);
  EXPECT_DOUBLE_EQ(offered.trace_span_ms, 10'000);
  // 200 tokens over 10 s is 20 tokens/s; 50% of 400 tokens/s needs 10x.
  EXPECT_DOUBLE_EQ(trace_speedup_for_load(offered, 0.5, 400), 10);
}

TEST(Dial, PoissonStartsAreSeededAndHaveTheRate) {
  auto starts = poisson_starts_ms(20'000, 5, 7);
  ASSERT_EQ(starts.size(), 20'000u);
  EXPECT_EQ(starts.front(), 0);
  EXPECT_EQ(starts, poisson_starts_ms(20'000, 5, 7));
  EXPECT_NE(starts, poisson_starts_ms(20'000, 5, 8));
  EXPECT_TRUE(std::is_sorted(starts.begin(), starts.end()));
  // 19,999 gaps of mean 200 ms: the observed rate within 3%.
  const double rate = 19'999 / (starts.back() / 1000);
  EXPECT_NEAR(rate, 5, 0.15);
}

TEST(Dial, ReplicaMetricsAndTheLoadTheyMeasured) {
  const std::string before_text =
      "# HELP kvgate_sim_busy_seconds_total x\n"
      "kvgate_sim_prefill_tokens_per_second{replica=\"r0\"} 740740\n"
      "kvgate_sim_busy_seconds_total{replica=\"r0\"} 1.5\n"
      "kvgate_sim_prefill_seconds_total{replica=\"r0\"} 1\n"
      "kvgate_sim_prefill_seconds_total_other{replica=\"r0\"} 99\n"
      "vllm:prompt_tokens_total{model_name=\"m\"} 12\n";
  auto before = parse_replica_metrics(before_text);
  EXPECT_EQ(before.prefill_tokens_per_s, 740740);
  EXPECT_EQ(before.busy_seconds, 1.5);
  EXPECT_EQ(before.prefill_seconds, 1);
  EXPECT_EQ(before.prompt_tokens, 12);
  EXPECT_FALSE(before.num_gpu_blocks);
  ReplicaMetrics after;
  after.busy_seconds = 9.5;
  after.prefill_seconds = 5;
  ReplicaMetrics idle = before;
  // Two replicas over 10 s: 8 + 0 busy seconds, 4 + 0 prefill seconds.
  auto load = fleet_load({before, before}, {after, idle}, 10);
  ASSERT_TRUE(load.measured);
  EXPECT_DOUBLE_EQ(load.busy_fraction, 0.4);
  EXPECT_DOUBLE_EQ(load.prefill_utilisation, 0.2);
  EXPECT_FALSE(fleet_load({before}, {ReplicaMetrics{}}, 10).measured);  // a replica without the counters
  EXPECT_FALSE(parse_replica_metrics("garbage\nkvgate_sim_busy_seconds_total{} x\n").busy_seconds);
}

// A fake target whose p90 TTFT crosses the SLO at load 0.8.
TEST(Capacity, BisectionFindsTheLoadWhereTheSloBreaks) {
  CapacitySearch search(0.5, 12, 0.02);
  std::vector<double> tried;
  while (auto load = search.next()) {
    tried.push_back(*load);
    search.record(*load, *load <= 0.8);
  }
  EXPECT_LE(search.steps(), 12u);
  EXPECT_EQ(tried.front(), 0.5);
  EXPECT_EQ(tried[1], 1.0);  // doubled until a step missed
  EXPECT_LE(search.capacity(), 0.8);
  EXPECT_GE(search.capacity(), 0.8 * 0.98 - 1e-9);
}

TEST(Capacity, NothingHoldsMeansZeroAndTheStepsAreBounded) {
  CapacitySearch never(0.5, 4);
  std::uint32_t runs = 0;
  while (auto load = never.next()) {
    never.record(*load, false);
    ++runs;
  }
  EXPECT_EQ(runs, 4u);
  EXPECT_EQ(never.capacity(), 0);
  CapacitySearch always(0.5, 3);
  while (auto load = always.next()) {
    always.record(*load, true);
  }
  EXPECT_EQ(always.capacity(), 2.0);  // 0.5, 1, 2: every step doubled
}

}  // namespace
}  // namespace kvgate::load
