#include "kvgate/policy/disaggregation.hpp"

#include <gtest/gtest.h>

#include <vector>

namespace kvgate::policy {
namespace {

// A disaggregated fleet: decoders d1, d2 and prefill workers p1, p2 (views
// in that order); `cached` per worker, the rest idle.
std::vector<WorkerView> fleet(std::vector<std::uint32_t> cached) {
  std::vector<WorkerView> views;
  const char* ids[] = {"d1", "d2", "p1", "p2"};
  for (std::size_t index = 0; index < 4; ++index) {
    WorkerView view{ids[index], true, 0, 0, cached[index]};
    view.decodes = index < 2;
    view.prefills_for_others = index >= 2;
    views.push_back(view);
  }
  return views;
}

RouteRequest request_of(std::uint32_t input_tokens, std::uint64_t sequence = 0) {
  RouteRequest request{"m", std::nullopt, sequence, {}, input_tokens};
  return request;
}

const PrefillRule kRule{512, 0.7, 0.001, TransferSource::configured, false};

TEST(Disaggregation, ADecoderLackingFewTokensPrefillsItself) {
  auto views = fleet({7'700, 0, 0, 0});
  auto choice = choose_prefill(kRule, request_of(8'000), views, 0);
  EXPECT_EQ(choice.reason, Reason::local_prefill);
  EXPECT_FALSE(choice.worker);
  EXPECT_EQ(choice.decoder_cached_tokens, 7'700u);
  // Every prefill worker is still priced, for the explanation.
  ASSERT_EQ(choice.candidates.size(), 2u);
  EXPECT_GT(choice.candidates[0].expected_ms, 0);
}

TEST(Disaggregation, HoldingTheRatioIsEnoughEvenWhenTheRestIsLong) {
  // 30,000 of 40,000 cached: 10,000 uncached is over the token threshold,
  // but 75% is over the ratio.
  auto views = fleet({30'000, 0, 0, 0});
  EXPECT_EQ(choose_prefill(kRule, request_of(40'000), views, 0).reason, Reason::local_prefill);
  // At 60% it is not: the prefill goes to a prefill worker.
  views[0].cached_tokens = 24'000;
  EXPECT_EQ(choose_prefill(kRule, request_of(40'000), views, 0).reason, Reason::remote_prefill);
  // A ratio of 1 never decides on its own.
  PrefillRule never{512, 1.0, 0.001, TransferSource::configured, false};
  views[0].cached_tokens = 39'000;
  EXPECT_EQ(choose_prefill(never, request_of(40'000), views, 0).reason, Reason::remote_prefill);
}

TEST(Disaggregation, TheRemotePrefillGoesWhereQueuePrefillAndTransferAreLeast) {
  // p2 holds most of the prompt: its prefill is shortest.
  auto views = fleet({0, 0, 0, 6'000});
  auto choice = choose_prefill(kRule, request_of(8'000), views, 0);
  ASSERT_EQ(choice.reason, Reason::remote_prefill);
  ASSERT_TRUE(choice.worker);
  EXPECT_EQ(*choice.worker, 3u);
  EXPECT_EQ(choice.remote_ms, choice.candidates[1].expected_ms);
  // A queue in front of p2 worth more than its saving sends it to p1.
  views[3].pending_prefill_tokens = 20'000;
  choice = choose_prefill(kRule, request_of(8'000), views, 0);
  ASSERT_TRUE(choice.worker);
  EXPECT_EQ(*choice.worker, 2u);
  // Every candidate's parts add up.
  for (const auto& candidate : choice.candidates) {
    EXPECT_DOUBLE_EQ(candidate.expected_ms, candidate.queue_ms + candidate.prefill_ms + candidate.transfer_ms);
  }
}

TEST(Disaggregation, OnlyWhatTheDecoderLacksIsTransferred) {
  auto views = fleet({256, 0, 0, 0});
  auto choice = choose_prefill(kRule, request_of(8'000), views, 0);
  ASSERT_EQ(choice.reason, Reason::remote_prefill);
  EXPECT_DOUBLE_EQ(choice.candidates[0].transfer_ms, (8'000 - 256) * kRule.transfer_ms_per_token);
  // The choice names the price it used and where it came from.
  EXPECT_DOUBLE_EQ(choice.transfer_ms_per_token, kRule.transfer_ms_per_token);
  EXPECT_EQ(choice.transfer_source, TransferSource::configured);
}

TEST(Disaggregation, WithoutAnEligiblePrefillWorkerTheDecoderPrefills) {
  auto views = fleet({0, 0, 0, 0});
  views[2].healthy = false;
  views[3].ejected = true;
  auto choice = choose_prefill(kRule, request_of(8'000), views, 0);
  EXPECT_EQ(choice.reason, Reason::prefill_unavailable);
  EXPECT_FALSE(choice.worker);
  EXPECT_EQ(choice.candidates[0].ineligible_because, Ineligible::unhealthy);
  EXPECT_EQ(choice.candidates[1].ineligible_because, Ineligible::ejected);
  // A prefill worker that failed this request is not asked again.
  views = fleet({0, 0, 0, 0});
  std::vector<std::size_t> tried{2};
  auto request = request_of(8'000);
  request.excluded = tried;
  choice = choose_prefill(kRule, request, views, 0);
  ASSERT_TRUE(choice.worker);
  EXPECT_EQ(*choice.worker, 3u);
}

TEST(Disaggregation, RoundRobinRotatesThePrefillPool) {
  PrefillRule rotate{0, 1.0, 0.001, TransferSource::configured, true};
  auto views = fleet({0, 0, 0, 8'000});  // p2 holds the prompt: round robin ignores it
  std::vector<std::size_t> picks;
  for (std::uint64_t sequence = 0; sequence < 4; ++sequence) {
    picks.push_back(*choose_prefill(rotate, request_of(1'000, sequence), views, 0).worker);
  }
  EXPECT_EQ(picks, (std::vector<std::size_t>{2, 3, 2, 3}));
}

TEST(Disaggregation, EqualPrefillWorkersShareTheLoad) {
  auto views = fleet({0, 0, 0, 0});
  std::vector<std::size_t> picks;
  for (std::uint64_t sequence = 0; sequence < 4; ++sequence) {
    picks.push_back(*choose_prefill(kRule, request_of(8'000, sequence), views, 0).worker);
  }
  EXPECT_EQ(std::count(picks.begin(), picks.end(), 2u), 2);
}

TEST(Disaggregation, APrefillWorkerIsNeverPickedToDecode) {
  auto views = fleet({0, 0, 9'000, 9'000});  // the prefill workers hold the whole prompt
  auto policy = make_cache_aware(CostModel{});
  auto decision = policy->decide(request_of(10'000), views);
  ASSERT_TRUE(decision.worker_index);
  EXPECT_LT(*decision.worker_index, 2u);
  EXPECT_EQ(decision.candidates[2].ineligible_because, Ineligible::prefill_only);
  auto round_robin = make_round_robin();
  for (std::uint64_t sequence = 0; sequence < 4; ++sequence) {
    EXPECT_LT(*round_robin->decide(request_of(10'000, sequence), views).worker_index, 2u);
  }
}

}  // namespace
}  // namespace kvgate::policy
