#include "kvgate/workers/engine_identity.hpp"

#include <gtest/gtest.h>

#include "kvgate/workers/engine_prefill_level.hpp"
#include "kvgate/workers/scrape_schedule.hpp"

namespace kvgate::workers {
namespace {

using config::CacheModel;
using config::EngineKind;

TEST(EngineIdentity, TheMetricNamesTellTheEngine) {
  EXPECT_EQ(engine_kind_from_metrics(parse_prometheus_text("llamacpp:prompt_tokens_total 3\n"
                                                           "llamacpp:requests_processing 0\n")),
            EngineKind::llamacpp);
  EXPECT_EQ(engine_kind_from_metrics(parse_prometheus_text("vllm:num_requests_running{engine=\"0\"} 1\n"
                                                           "process_cpu_seconds_total 2\n")),
            EngineKind::vllm);
  EXPECT_EQ(engine_kind_from_metrics(parse_prometheus_text("sglang:num_running_reqs 1\nsglang:token_usage 0.1\n"
                                                           "vllm:some_bridge_metric 1\n")),
            EngineKind::sglang);
  EXPECT_EQ(engine_kind_from_metrics(parse_prometheus_text("process_cpu_seconds_total 2\n")), std::nullopt);
}

TEST(EngineIdentity, LlamaServerPropsGiveTheSlots) {
  auto props = parse_llamacpp_props(
      R"({"default_generation_settings":{"n_ctx":2048,"params":{}},"total_slots":2,"build_info":"b9928-81ff7abe5"})");
  ASSERT_TRUE(props) << props.error();
  EXPECT_EQ(props->total_slots, 2u);
  EXPECT_EQ(props->slot_context_tokens, 2048u);
  EXPECT_EQ(props->build, "b9928-81ff7abe5");
  EXPECT_FALSE(parse_llamacpp_props("not json"));
  EXPECT_FALSE(parse_llamacpp_props(R"({"total_slots":0})"));
  EXPECT_FALSE(parse_llamacpp_props(R"({"total_slots":"2"})"));
  EXPECT_FALSE(parse_llamacpp_props(R"([1,2])"));
}

config::WorkerOptions bare_worker() {
  config::WorkerOptions worker;
  worker.id = "w";
  return worker;
}

EngineIdentity llamacpp_with_slots(std::uint32_t slots) {
  EngineIdentity identity;
  identity.kind = EngineKind::llamacpp;
  identity.evidence = "/metrics names (llamacpp:*) and /props";
  identity.slots = slots;
  return identity;
}

// A worker configured with nothing but its URL takes what its engine says.
// vLLM's /v1/models lists each adapter with the base model as its parent.
TEST(EngineIdentity, ServedAdaptersAreTheEntriesWhoseParentIsTheModel) {
  const auto body = R"({"object":"list","data":[
    {"id":"llama","object":"model","root":"/models/llama","parent":null},
    {"id":"sql-lora","object":"model","root":"/adapters/sql","parent":"llama"},
    {"id":"other","object":"model","parent":"mistral"},
    {"id":"sql-lora","object":"model","parent":"llama"},
    {"id":"","parent":"llama"}, {"id":7,"parent":"llama"}, "junk",
    {"id":"ops-lora","object":"model","parent":"llama"}]})";
  auto adapters = parse_served_adapters(body, "llama");
  ASSERT_TRUE(adapters);
  EXPECT_EQ(*adapters, (std::vector<std::string>{"sql-lora", "ops-lora"}));
  EXPECT_TRUE(parse_served_adapters(R"({"data":[]})", "llama")->empty());
  EXPECT_FALSE(parse_served_adapters("not json", "llama"));
  EXPECT_FALSE(parse_served_adapters(R"({"models":[]})", "llama"));
}

TEST(EngineIdentity, KeysTheConfigurationLeftOutFollowTheEngine) {
  const auto before = resolve_engine(bare_worker(), std::nullopt, std::nullopt);
  EXPECT_EQ(before.engine, EngineKind::vllm);
  EXPECT_EQ(before.cache_model, CacheModel::blocks);

  const auto llama = resolve_engine(bare_worker(), llamacpp_with_slots(2), std::nullopt);
  EXPECT_EQ(llama.engine, EngineKind::llamacpp);
  EXPECT_EQ(llama.cache_model, CacheModel::sequences);
  EXPECT_EQ(llama.slots, 2u);
  EXPECT_EQ(llama.cache_ram_mib, config::kLlamacppDefaultCacheRamMib);  // llama-server's own default
  // Its answers showed no RAM cache.
  EXPECT_EQ(resolve_engine(bare_worker(), llamacpp_with_slots(2), false).cache_ram_mib, 0u);
  EXPECT_EQ(resolve_engine(bare_worker(), llamacpp_with_slots(2), true).cache_ram_mib,
            config::kLlamacppDefaultCacheRamMib);
}

TEST(EngineIdentity, ConfiguredKeysWinAndAContradictionIsNamed) {
  auto configured = bare_worker();
  configured.slots = 4;
  configured.cache_ram_mib = 0;
  configured.given.slots = true;
  configured.given.cache_ram_mib = true;
  const auto resolved = resolve_engine(configured, llamacpp_with_slots(2), true);
  EXPECT_EQ(resolved.slots, 4u);
  EXPECT_EQ(resolved.cache_ram_mib, 0u);
  const auto found = contradictions(configured, llamacpp_with_slots(2));
  ASSERT_EQ(found.size(), 1u);
  EXPECT_NE(found[0].find("slots 4"), std::string::npos);
  EXPECT_NE(found[0].find("total_slots 2"), std::string::npos);

  auto vllm = bare_worker();
  vllm.given.engine = true;
  const auto engine = contradictions(vllm, llamacpp_with_slots(2));
  ASSERT_EQ(engine.size(), 1u);
  EXPECT_NE(engine[0].find("engine vllm"), std::string::npos);
  EXPECT_NE(engine[0].find("say llamacpp"), std::string::npos);
  // The configuration still wins.
  EXPECT_EQ(resolve_engine(vllm, llamacpp_with_slots(2), std::nullopt).cache_model, CacheModel::blocks);
  EXPECT_TRUE(contradictions(bare_worker(), llamacpp_with_slots(2)).empty());
}

// A llama.cpp worker that streams KV events is indexed from them.
TEST(EngineIdentity, AWorkerWithEventsStaysABlockCache) {
  auto worker = bare_worker();
  worker.kv_events = "tcp://w:5557";
  const auto resolved = resolve_engine(worker, llamacpp_with_slots(2), std::nullopt);
  EXPECT_EQ(resolved.engine, EngineKind::llamacpp);
  EXPECT_EQ(resolved.cache_model, CacheModel::blocks);
  EXPECT_EQ(resolved.slots, 0u);
}

TEST(RamCacheEvidence, TwoRecomputedRamPrefixesSayThereIsNone) {
  RamCacheEvidence evidence;
  // 320 tokens credited from RAM on top of 0 in a slot; the engine computed
  // them again (reported a few tokens of a shared head).
  EXPECT_EQ(evidence.record(0, 320, 5, 16), std::nullopt);
  EXPECT_EQ(evidence.record(0, 320, 0, 16), false);
  EXPECT_EQ(evidence.verdict(), false);
  // Without a RAM credit, the engine serving more than the slots held says
  // there is one after all.
  // there is one after all, but only after more than it took to say none.
  for (int turn = 0; turn < 3; ++turn) {
    EXPECT_EQ(evidence.record(64, 0, 400, 16), std::nullopt);
  }
  EXPECT_EQ(evidence.record(64, 0, 390, 16), true);
  EXPECT_EQ(evidence.verdict(), true);
}

// While the RAM cache is modelled, a hit beyond the slots that it did not
// credit is the slot model's error (a sequence it lost, an answer's
// tokens): no evidence either way. Once none was shown, only a hit well
// beyond the slots is.
TEST(RamCacheEvidence, AHitTheRamModelDidNotCreditIsNoEvidenceForIt) {
  RamCacheEvidence evidence;
  for (int turn = 0; turn < 10; ++turn) {
    EXPECT_EQ(evidence.record(0, 0, 880, 16), std::nullopt);
    EXPECT_EQ(evidence.record(2500, 0, 2563, 16), std::nullopt);
  }
  EXPECT_EQ(evidence.verdict(), std::nullopt);
  EXPECT_EQ(evidence.record(0, 320, 0, 16), std::nullopt);
  EXPECT_EQ(evidence.record(0, 320, 0, 16), false);
  for (int turn = 0; turn < 10; ++turn) {
    EXPECT_EQ(evidence.record(2500, 0, 2563, 16), std::nullopt);  // an answer's tokens
  }
  EXPECT_EQ(evidence.verdict(), false);
}

// A slot model that lost track of a slot sees a RAM credit delivered now
// and then; three recomputed RAM credits to one delivered still say none.
TEST(RamCacheEvidence, ThreeAgainstOneStillSayThereIsNone) {
  RamCacheEvidence evidence;
  EXPECT_EQ(evidence.record(0, 320, 321, 16), std::nullopt);  // delivered
  EXPECT_EQ(evidence.record(0, 320, 0, 16), std::nullopt);
  EXPECT_EQ(evidence.record(0, 320, 0, 16), std::nullopt);
  EXPECT_EQ(evidence.record(0, 320, 5, 16), false);
}

TEST(RamCacheEvidence, AnswersWithinABlockOfTheSlotsTellNothing) {
  RamCacheEvidence evidence;
  for (int turn = 0; turn < 10; ++turn) {
    EXPECT_EQ(evidence.record(320, 0, 330, 16), std::nullopt);  // a slot's token-grained hit
    EXPECT_EQ(evidence.record(320, 0, 310, 16), std::nullopt);
  }
  EXPECT_EQ(evidence.verdict(), std::nullopt);
  // A RAM credit the engine delivered is evidence for it.
  EXPECT_EQ(evidence.record(0, 320, 318, 16), std::nullopt);
  EXPECT_EQ(evidence.record(0, 320, 321, 16), true);
}

TEST(EnginePrefillLevel, TheCountersGrowthSetsTheLevelAndARestartStartsAgain) {
  EnginePrefillLevel level;
  level.observe(0, 0);
  EXPECT_EQ(level.ms_per_token(), std::nullopt);
  level.observe(0.2, 400);  // below the minimum tokens
  EXPECT_EQ(level.ms_per_token(), std::nullopt);
  level.observe(0.5, 1000);
  ASSERT_TRUE(level.ms_per_token());
  EXPECT_DOUBLE_EQ(*level.ms_per_token(), 0.5);
  // A restart: the counters start again from zero; no negative growth counts.
  level.observe(0.01, 10);
  EXPECT_DOUBLE_EQ(*level.ms_per_token(), 0.5);
  level.observe(2.01, 1010);  // 2 ms per token since
  EXPECT_GT(*level.ms_per_token(), 0.5);
  // Recent work outweighs old once the window is full.
  for (int scrape = 0; scrape < 40; ++scrape) {
    level.observe(2.01 + 2.0 * (scrape + 1), 1010 + 1000.0 * (scrape + 1));
  }
  EXPECT_NEAR(*level.ms_per_token(), 2.0, 0.05);
}

// A gateway that starts beside a running engine prices it from its totals.
TEST(EnginePrefillLevel, AnEngineWithHistoryHasALevelAtTheFirstScrape) {
  EnginePrefillLevel level;
  level.observe(30.0, 100'000);
  ASSERT_TRUE(level.ms_per_token());
  EXPECT_DOUBLE_EQ(*level.ms_per_token(), 0.3);
  EXPECT_LE(level.tokens(), EnginePrefillLevel::kWindowTokens);
  level.observe(30.0 + 0.6, 101'000);  // then its growth moves it
  EXPECT_GT(*level.ms_per_token(), 0.3);
  EnginePrefillLevel fresh;
  fresh.observe(0.01, 20);  // too little behind it
  EXPECT_EQ(fresh.ms_per_token(), std::nullopt);
}

TEST(ScrapeSchedule, TheTimeoutFollowsTheObservedLatency) {
  ScrapeSchedule schedule;
  EXPECT_EQ(schedule.timeout_ms(1000), 1000u);
  for (int scrape = 0; scrape < 10; ++scrape) {
    schedule.started();
    schedule.finished(true, 0, 1000, 30'000, 20);
  }
  EXPECT_EQ(schedule.timeout_ms(1000), 1000u);  // never below the configured one
  for (int scrape = 0; scrape < 20; ++scrape) {
    schedule.started();
    schedule.finished(true, 0, 1000, 30'000, 900 + 100 * (scrape % 2));
  }
  EXPECT_GT(schedule.timeout_ms(1000), 2500u);  // a busy llama.cpp's pages take about a second
  const auto learned = schedule.timeout_ms(1000);
  schedule.started();
  schedule.finished(false, 0, 1000, 30'000);
  EXPECT_EQ(schedule.timeout_ms(1000), std::min<std::uint64_t>(2 * learned, ScrapeSchedule::kMaxTimeoutMs));
  for (int failure = 0; failure < 10; ++failure) {
    schedule.started();
    schedule.finished(false, 0, 1000, 30'000);
  }
  EXPECT_EQ(schedule.timeout_ms(1000), ScrapeSchedule::kMaxTimeoutMs);
}

}  // namespace
}  // namespace kvgate::workers
