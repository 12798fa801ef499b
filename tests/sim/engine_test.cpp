#include "engine.hpp"

#include <gtest/gtest.h>

#include <numeric>
#include <set>

namespace kvgate::sim {
namespace {

constexpr std::uint32_t kBlockSize = 4;

std::vector<TokenId> prompt(std::size_t length, TokenId first = 1) {
  std::vector<TokenId> tokens(length);
  std::iota(tokens.begin(), tokens.end(), first);
  return tokens;
}

Engine make_engine(std::uint32_t blocks = 64, EngineLimits limits = {}, StepCost cost = {}) {
  return Engine(blocks, kBlockSize, limits, cost);
}

// Steps until the request finishes; returns the reports.
std::vector<StepReport> run_until_idle(Engine& engine, int limit = 1000) {
  std::vector<StepReport> reports;
  while (!engine.idle() && limit-- > 0) {
    reports.push_back(engine.step());
  }
  return reports;
}

TEST(Engine, PrefillsThenDecodesOneTokenPerStep) {
  auto engine = make_engine();
  auto handle = engine.add({prompt(10), 3, 7});
  auto first = engine.step();
  ASSERT_EQ(first.progress.size(), 1u);
  EXPECT_EQ(first.progress[0].request, handle);
  EXPECT_EQ(first.prefill_tokens, 10u);
  EXPECT_TRUE(first.progress[0].first_token);
  EXPECT_EQ(first.progress[0].cached_tokens, 0u);
  auto second = engine.step();
  EXPECT_EQ(second.decode_sequences, 1u);
  EXPECT_FALSE(second.progress[0].finished);
  auto third = engine.step();
  EXPECT_TRUE(third.progress[0].finished);
  EXPECT_TRUE(engine.idle());
  EXPECT_EQ(engine.counters().generation_tokens, 3u);
  EXPECT_EQ(engine.counters().prompt_tokens, 10u);
  EXPECT_EQ(engine.pool().free_blocks(), 64u);
}

TEST(Engine, RepeatedPromptReusesFullBlocksButComputesTheLastToken) {
  auto engine = make_engine();
  engine.add({prompt(12), 1, 7});
  run_until_idle(engine);
  engine.add({prompt(12), 1, 7});
  auto report = engine.step();
  // 3 full blocks cached, but at most (12 - 1) / 4 = 2 may be reused.
  EXPECT_EQ(report.progress[0].cached_tokens, 8u);
  EXPECT_EQ(report.prefill_tokens, 4u);
  run_until_idle(engine);
  engine.add({prompt(17), 1, 7});
  EXPECT_EQ(engine.step().progress[0].cached_tokens, 12u);
  EXPECT_EQ(engine.counters().prefix_hit_tokens, 20u);
  EXPECT_EQ(engine.counters().prefix_queries_tokens, 12u + 12u + 17u);
}

TEST(Engine, GeneratedTokensAreCachedToo) {
  auto engine = make_engine();
  // 6 prompt tokens + 5 outputs: KV computed for 6 + 4 = 10 tokens, 2 full blocks.
  engine.add({prompt(6), 5, 7});
  run_until_idle(engine);
  std::vector<TokenId> follow_up = prompt(6);
  for (std::uint32_t index = 0; index < 4; ++index) {
    follow_up.push_back(filler_token(index));
  }
  follow_up.push_back(9999);
  engine.add({follow_up, 1, 7});
  EXPECT_EQ(engine.step().progress[0].cached_tokens, 8u);
}

TEST(Engine, DifferentHashSeedsShareNothing) {
  auto engine = make_engine();
  engine.add({prompt(12), 1, 7});
  run_until_idle(engine);
  engine.add({prompt(12), 1, 8});  // e.g. another cache_salt
  EXPECT_EQ(engine.step().progress[0].cached_tokens, 0u);
}

TEST(Engine, ChunkedPrefillStaysWithinTheTokenBudget) {
  auto engine = make_engine(64, {256, 8});
  engine.add({prompt(20), 1, 7});
  EXPECT_EQ(engine.step().prefill_tokens, 8u);
  EXPECT_EQ(engine.step().prefill_tokens, 8u);
  auto last = engine.step();
  EXPECT_EQ(last.prefill_tokens, 4u);
  EXPECT_TRUE(last.progress[0].first_token);
}

TEST(Engine, RunningRequestsComeBeforeNewOnes) {
  auto engine = make_engine(64, {256, 8});
  engine.add({prompt(4), 5, 7});
  engine.step();  // prefill of the first
  engine.add({prompt(20, 500), 1, 7});
  auto report = engine.step();
  ASSERT_EQ(report.progress.size(), 2u);
  EXPECT_EQ(report.decode_sequences, 1u);
  EXPECT_EQ(report.prefill_tokens, 7u);  // the budget left after one decode token
}

TEST(Engine, MaxNumSeqsBoundsTheBatch) {
  auto engine = make_engine(64, {2, 8192});
  for (int index = 0; index < 3; ++index) {
    engine.add({prompt(4, static_cast<TokenId>(index * 100)), 4, 7});
  }
  auto report = engine.step();
  EXPECT_EQ(report.progress.size(), 2u);
  EXPECT_EQ(engine.running(), 2u);
  EXPECT_EQ(engine.waiting(), 1u);
}

TEST(Engine, HeadOfQueueThatDoesNotFitBlocksTheQueue) {
  auto engine = make_engine(4);
  engine.add({prompt(8), 8, 7});  // holds 2 blocks, grows to 4
  engine.step();
  engine.add({prompt(12, 100), 1, 7});  // needs 3 blocks: does not fit
  engine.add({prompt(2, 200), 1, 7});   // would fit, but FCFS
  auto report = engine.step();
  EXPECT_EQ(report.progress.size(), 1u);
  EXPECT_EQ(engine.waiting(), 2u);
}

TEST(Engine, OutOfBlocksPreemptsTheMostRecentlyAdmitted) {
  auto engine = make_engine(4);
  auto older = engine.add({prompt(7), 8, 7});  // 2 blocks, needs a third at 9 tokens
  auto newer = engine.add({prompt(7, 100), 8, 7});
  engine.step();                // both prefilled: 4 blocks in use
  engine.step();                // both at 8 tokens of KV
  auto report = engine.step();  // older needs block 3: newer is preempted
  EXPECT_EQ(report.preemptions, 1u);
  ASSERT_EQ(report.progress.size(), 1u);
  EXPECT_EQ(report.progress[0].request, older);
  EXPECT_EQ(engine.waiting(), 1u);
  EXPECT_EQ(engine.counters().preemptions, 1u);
  // Everything still completes; the preempted request recomputes.
  auto reports = run_until_idle(engine);
  bool newer_finished = false;
  for (const auto& step : reports) {
    for (const auto& progress : step.progress) {
      newer_finished = newer_finished || (progress.request == newer && progress.finished);
    }
  }
  EXPECT_TRUE(newer_finished);
  EXPECT_EQ(engine.pool().free_blocks(), 4u);
}

TEST(Engine, StepDurationFollowsTheCostModel) {
  StepCost cost{5.0, 0.1, 0.5, 0.01};
  auto engine = make_engine(64, {}, cost);
  engine.add({prompt(20), 2, 7});
  auto prefill = engine.step();
  EXPECT_DOUBLE_EQ(prefill.duration_ms, 5.0 + 20 * 0.1 + 20 * 0.01);
  auto decode = engine.step();
  EXPECT_DOUBLE_EQ(decode.duration_ms, 5.0 + 0.5 + 21 * 0.01);
  // A cached prompt prefills less, so its first token comes sooner.
  engine.add({prompt(20), 1, 7});
  auto cached = engine.step();
  EXPECT_LT(cached.duration_ms, prefill.duration_ms);
  EXPECT_DOUBLE_EQ(engine.step().duration_ms, 0.0);  // idle
}

TEST(Engine, AbortFreesBlocksButKeepsThemCached) {
  auto engine = make_engine(8);
  auto handle = engine.add({prompt(12), 100, 7});
  engine.step();
  EXPECT_LT(engine.pool().free_blocks(), 8u);
  engine.abort(handle);
  EXPECT_TRUE(engine.idle());
  EXPECT_EQ(engine.pool().free_blocks(), 8u);
  engine.add({prompt(13), 1, 7});
  EXPECT_EQ(engine.step().progress[0].cached_tokens, 12u);
  engine.abort(424242);  // unknown handles are ignored
}

// A CPU tier of 8 blocks behind 6 GPU blocks: a prompt the GPU evicted is
// served from the tier, counted as cached, and its copy back costs time.
TEST(Engine, GpuEvictedBlocksMoveToTheCpuTierAndLoadBackForTheirTransferTime) {
  StepCost cost{0, 1.0, 0, 0, 0.25};  // 1 ms per prompt token, 0.25 ms per block loaded
  EngineLimits limits;
  limits.cpu_offload_blocks = 8;
  auto engine = make_engine(6, limits, cost);
  engine.add({prompt(12), 1, 7});
  run_until_idle(engine);
  engine.pool().take_events();
  // Another prompt of 24 tokens needs every GPU block: the first prompt's
  // three move to the CPU tier, reported with medium CPU.
  engine.add({prompt(24, 500), 1, 7});
  run_until_idle(engine);
  EXPECT_EQ(engine.pool().offloaded_blocks(), 3u);
  int offloaded = 0;
  for (const auto& event : engine.pool().take_events()) {
    if (const auto* stored = std::get_if<BlockStored>(&event); stored && stored->medium == Medium::cpu) {
      ++offloaded;
      EXPECT_EQ(stored->token_ids.size(), kBlockSize);
    }
  }
  EXPECT_EQ(offloaded, 3);
  // The first prompt again: two blocks reusable (the last token is
  // computed), both from the tier.
  engine.add({prompt(12), 1, 7});
  auto report = engine.step();
  EXPECT_EQ(report.progress[0].cached_tokens, 8u);
  EXPECT_EQ(report.loaded_blocks, 2u);
  EXPECT_EQ(report.prefill_tokens, 4u);
  EXPECT_DOUBLE_EQ(report.duration_ms, 4 * 1.0 + 2 * 0.25);
  EXPECT_EQ(engine.counters().offloaded_hit_tokens, 8u);
  EXPECT_EQ(engine.counters().prefix_hit_tokens, 0u);  // the GPU cache's own hits only
}

TEST(Engine, TheCpuTierDropsItsLeastRecentlyUsedBlocksWhenFull) {
  EngineLimits limits;
  limits.cpu_offload_blocks = 2;
  auto engine = make_engine(4, limits);
  engine.add({prompt(16), 1, 7});
  run_until_idle(engine);
  engine.add({prompt(16, 500), 1, 7});
  run_until_idle(engine);
  EXPECT_EQ(engine.pool().offloaded_blocks(), 2u);
  int dropped = 0;
  for (const auto& event : engine.pool().take_events()) {
    if (const auto* removed = std::get_if<BlockRemoved>(&event); removed && removed->medium == Medium::cpu) {
      ++dropped;
    }
  }
  EXPECT_GT(dropped, 0);
}

}  // namespace
}  // namespace kvgate::sim

namespace kvgate::sim {
namespace {

// vLLM's LoRA slots: a batch mixes at most max_loras adapters (a request
// for one more waits, passed over rather than blocking those behind it),
// loading an adapter lengthens the step that admits its request, and a
// loaded adapter is reused without a load.
TEST(EngineLora, ABatchMixesAtMostMaxLorasAdaptersAndLoadsCostTheirStep) {
  EngineLimits limits;
  limits.max_loras = 1;
  limits.lora_load_ms = 50;
  StepCost cost;
  cost.overhead_ms = 1;
  auto engine = make_engine(64, limits, cost);
  engine.add({prompt(8, 1), 4, 7, "", "a"});
  engine.add({prompt(8, 100), 4, 7, "", "b"});
  engine.add({prompt(8, 200), 4, 7, "", ""});  // the base model: no adapter
  auto first = engine.step();
  // a and the base-model request run; b waits (one slot, a holds it).
  EXPECT_EQ(first.progress.size(), 2u);
  EXPECT_EQ(engine.running_adapters(), std::vector<std::string>{"a"});
  EXPECT_EQ(engine.waiting_adapters(), std::vector<std::string>{"b"});
  EXPECT_GE(first.duration_ms, 50.0);
  EXPECT_EQ(engine.counters().lora_loads, 1u);
  run_until_idle(engine);
  EXPECT_EQ(engine.counters().lora_loads, 2u);  // b, once a was done
  engine.add({prompt(8, 300), 4, 7, "", "b"});
  auto reused = engine.step();
  EXPECT_LT(reused.duration_ms, 50.0);  // b is still loaded
  EXPECT_EQ(engine.counters().lora_loads, 2u);
}

}  // namespace
}  // namespace kvgate::sim

namespace kvgate::sim {
namespace {

// vLLM's hybrid KV cache: every position takes a block in each group; the
// sliding group frees the blocks its window has passed while the request
// runs (they stay cached), and a later hit needs the full group's prefix
// and the sliding group's window before the hit point.
TEST(HybridEngine, TheSlidingGroupFreesPassedBlocksAndAHitNeedsItsWindow) {
  EngineLimits limits;
  limits.groups = {CacheGroup{0}, CacheGroup{8}};  // window 8: ceil(7 / 4) = 2 blocks
  auto engine = make_engine(64, limits);
  engine.add({prompt(24), 4, 7});
  engine.step();  // the prefill: 6 positions in each group
  EXPECT_EQ(engine.pool().free_blocks(), 64u - 12u);
  engine.step();
  // A decode position in each group; the window (token 25 back to 18) has
  // passed the sliding group's blocks 0-3.
  EXPECT_EQ(engine.pool().free_blocks(), 64u - 12u - 2u + 4u);
  run_until_idle(engine);
  auto events = engine.pool().take_events();
  std::set<std::uint32_t> groups;
  for (const auto& event : events) {
    if (const auto* stored = std::get_if<BlockStored>(&event)) {
      ASSERT_TRUE(stored->group_idx.has_value());
      groups.insert(*stored->group_idx);
      EXPECT_EQ(stored->spec_kind, *stored->group_idx == 0 ? "full_attention" : "sliding_window");
      EXPECT_EQ(stored->sliding_window.has_value(), *stored->group_idx == 1);
    }
  }
  EXPECT_EQ(groups, (std::set<std::uint32_t>{0, 1}));
  // Freed, not evicted: the same prompt hits all of it.
  engine.add({prompt(24), 1, 7});
  EXPECT_EQ(engine.step().progress[0].cached_tokens, 20u);
  run_until_idle(engine);
}

}  // namespace
}  // namespace kvgate::sim
