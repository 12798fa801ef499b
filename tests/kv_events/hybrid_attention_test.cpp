// A hybrid-attention model end to end below the sockets: the simulator's
// vLLM hybrid KV cache (one full-attention group, sliding-window groups)
// publishes its events in vLLM's map form, the decoder and WorkerCaches
// apply them, and the index predicts each request's cached tokens before
// the engine admits it. The prediction must be the engine's figure for
// every request, where the full-attention group alone over-predicts.
#include <gtest/gtest.h>

#include <random>

#include "engine.hpp"
#include "kv_event_encoder.hpp"
#include "kvgate/kv_events/worker_caches.hpp"

namespace kvgate::kv_events {
namespace {

constexpr std::uint32_t kBlockSize = 4;

struct Outcome {
  std::uint32_t requests = 0;
  std::uint32_t exact = 0;
  std::uint32_t full_only_over = 0;  // the full-attention group alone predicted more
  std::uint32_t cached_tokens = 0;   // what the engine served from its cache, in all
};

class HybridFleet {
 public:
  HybridFleet(std::vector<sim::CacheGroup> groups, std::uint32_t pool_blocks, prefix::LocalAttention configured = {})
      : engine_(pool_blocks, kBlockSize, limits(std::move(groups)), {}) {
    attention_.configure(configured);
  }

  // Routes `prompt` to the one worker: predicts, runs it, applies events.
  void run(const std::vector<TokenId>& prompt, std::uint32_t max_tokens, Outcome& outcome) {
    const auto blocks = prefix::hash_blocks(prompt, kBlockSize, seed());
    auto match = index_.longest_prefix(blocks);
    const std::uint32_t reusable = (static_cast<std::uint32_t>(prompt.size()) - 1) / kBlockSize;
    const auto full_only = std::min(match.held(0), reusable) * kBlockSize;
    index_.limit_to_local_attention(blocks, attention_.effective(), kBlockSize, reusable, match);
    const auto predicted = match.held(0) * kBlockSize;
    engine_.add({prompt, max_tokens, seed()});
    std::optional<std::uint32_t> served;
    while (!engine_.idle()) {
      for (const auto& progress : engine_.step().progress) {
        if (progress.first_token) {
          served = progress.cached_tokens;
        }
      }
      publish();
    }
    ++outcome.requests;
    outcome.exact += predicted == served.value_or(UINT32_MAX) ? 1 : 0;
    outcome.full_only_over += full_only > served.value_or(0) ? 1 : 0;
    outcome.cached_tokens += served.value_or(0);
    EXPECT_EQ(predicted, served.value_or(UINT32_MAX)) << "request " << outcome.requests;
  }

  AttentionLayout& attention() { return attention_; }

 private:
  static sim::EngineLimits limits(std::vector<sim::CacheGroup> groups) {
    sim::EngineLimits limits;
    limits.groups = std::move(groups);
    return limits;
  }
  static BlockHash seed() { return prefix::partition_seed({"model", "", ""}); }
  void publish() {
    auto events = engine_.pool().take_events();
    if (events.empty()) {
      return;
    }
    auto batch = decode_batch(sim::encode_event_batch(events, 0, std::nullopt, sim::EventFormat::map));
    ASSERT_TRUE(batch.has_value());
    ASSERT_EQ(batch->malformed_events, 0u);
    const auto stats = caches_.apply(0, *batch, ++now_ms_);
    EXPECT_EQ(stats.unknown_group_blocks, 0u);
  }

  sim::Engine engine_;
  index::PrefixIndex index_{1'000'000};
  AttentionLayout attention_;
  WorkerCaches caches_{index_, "model", CacheLimits{kBlockSize}, attention_};
  std::uint64_t now_ms_ = 0;
};

// Conversations that share a system prompt, each turn resending the last
// turn's prompt and answer, on a pool small enough to evict.
Outcome converse(HybridFleet& fleet, std::uint32_t conversations, std::uint32_t turns) {
  std::mt19937 random(20261204);
  std::vector<TokenId> system(40);
  for (auto& token : system) {
    token = 5000 + random() % 1000;
  }
  std::vector<std::vector<TokenId>> history(conversations, system);
  Outcome outcome;
  for (std::uint32_t turn = 0; turn < turns; ++turn) {
    for (auto& prompt : history) {
      const auto question = 3 + random() % 30;
      for (std::uint32_t token = 0; token < question; ++token) {
        prompt.push_back(10'000 + random() % 20'000);
      }
      const std::uint32_t answer = 2 + random() % 24;
      fleet.run(prompt, answer, outcome);
      for (std::uint32_t index = 0; index < answer; ++index) {
        prompt.push_back(sim::filler_token(index));  // the engine's answer, resent
      }
    }
  }
  return outcome;
}

TEST(HybridAttention, EventsTeachTheLayoutAndEveryPredictionIsTheEnginesFigure) {
  // gpt-oss's shape at a small scale: one full group, one sliding window.
  HybridFleet fleet({{0}, {12}}, 160);
  auto outcome = converse(fleet, 8, 6);
  EXPECT_EQ(outcome.exact, outcome.requests);
  EXPECT_GT(outcome.cached_tokens, 0u);
  // The case a full-attention-only index gets wrong happened.
  EXPECT_GT(outcome.full_only_over, 0u);
  ASSERT_TRUE(fleet.attention().reported().has_value());
  EXPECT_EQ(*fleet.attention().reported(), (prefix::LocalAttention{prefix::AttentionKind::sliding_window, 12}));
}

TEST(HybridAttention, SeveralSlidingGroupsOfOneWindowCountAsOne) {
  // Gemma 3's shape: the sliding layers split into groups of equal size.
  HybridFleet fleet({{0}, {16}, {16}, {16}}, 320);
  auto outcome = converse(fleet, 6, 5);
  EXPECT_EQ(outcome.exact, outcome.requests);
  EXPECT_GT(outcome.full_only_over, 0u);
}

}  // namespace
}  // namespace kvgate::kv_events
