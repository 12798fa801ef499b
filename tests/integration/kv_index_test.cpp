// The prefix index end to end: kvgate in front of kvgate-sim replicas that
// publish vLLM KV events over real ZMQ. The index must predict exactly the
// cached tokens the engine then reports, and follow eviction, reset, gaps
// (with replay), restarts and a publisher that dies and comes back.
#include <gtest/gtest.h>

#include <chrono>
#include <csignal>
#include <fstream>
#include <set>
#include <thread>

#include <nlohmann/json.hpp>

#include "support/fleet.hpp"

namespace kvgate::testing {
namespace {

using nlohmann::json;
using namespace std::chrono_literals;
TEST(KvIndex, DryRunPredictsExactlyTheCachedTokensTheEngineReports) {
  Fleet fleet;
  fleet.add_sim("map-worker", "map");
  fleet.add_sim("array-worker", "array");
  fleet.add_sim("sglang-worker", "sglang");
  fleet.start_gateway();
  auto first = first_turn("My kitchen tap drips after I close it. What do I need to fix it?");
  auto [served_by, answer] = fleet.turn(first);
  fleet.wait_synced("map-worker");
  fleet.wait_synced("array-worker");
  fleet.wait_synced("sglang-worker");
  auto follow_up = chat_request(second_turn(first, answer, "And which wrench fits the nut under the sink?"));
  auto route = fleet.route(follow_up);
  EXPECT_EQ(route["worker"], served_by) << route.dump();
  EXPECT_GT(Fleet::predicted(route, served_by), 0u);
  for (const auto* id : {"map-worker", "array-worker", "sglang-worker"}) {
    EXPECT_EQ(Fleet::predicted(route, id), fleet.engine_cached(id, follow_up)) << id << ": " << route.dump();
  }
  EXPECT_EQ(route["input_tokens"],
            json::parse(post_json(fleet.sim(served_by).port(), "/v1/chat/completions", follow_up.dump())
                            .body)["usage"]["prompt_tokens"]);
}

// The salt reaches kvgate in each engine's own way: vLLM's extra_keys (map
// and array forms), SGLang's trailing metadata map.
TEST(KvIndex, SaltedPromptsShareNothingWithUnsaltedOnes) {
  for (const auto* format : {"map", "array", "sglang"}) {
    SCOPED_TRACE(format);
    Fleet fleet;
    fleet.add_sim("a", format);
    fleet.start_gateway();
    auto messages = first_turn("How do I replace a broken hinge on a kitchen cupboard door?");
    auto salted = chat_request(messages);
    salted["cache_salt"] = "tenant-1";
    ASSERT_EQ(post_json(fleet.harness.api_port(), "/v1/chat/completions", salted.dump()).status, 200);
    fleet.wait_synced("a");
    auto plain = chat_request(messages);
    EXPECT_EQ(Fleet::predicted(fleet.route(plain), "a"), 0u);
    EXPECT_EQ(fleet.engine_cached("a", plain), 0u);
    auto prediction = Fleet::predicted(fleet.route(salted), "a");
    EXPECT_GT(prediction, 0u);
    EXPECT_EQ(prediction, fleet.engine_cached("a", salted));
  }
}

// A LoRA adapter is its own cache partition on the base model's workers, in
// the engine (vLLM puts the adapter in the first block's extra keys) and in
// the index (its events carry lora_name): a prompt cached under one adapter
// is predicted, and is, a hit for that adapter only.
TEST(KvIndex, EachLoraAdapterIsItsOwnPartition) {
  for (const char* format : {"map", "array"}) {
    SCOPED_TRACE(format);
    Fleet fleet;
    fleet.adapters = {"support-bot", "sql-bot"};
    fleet.add_sim("a", format, true, {"--lora-adapters", "support-bot,sql-bot"});
    fleet.start_gateway();
    auto models = json::parse(get(fleet.harness.api_port(), "/v1/models").body)["data"];
    ASSERT_EQ(models.size(), 3u);
    EXPECT_EQ(models[1]["id"], "support-bot");
    EXPECT_EQ(models[1]["parent"], "sim-model");
    auto messages = first_turn("Which sealant keeps a bathroom window frame dry?");
    auto support = chat_request(messages);
    support["model"] = "support-bot";
    ASSERT_EQ(post_json(fleet.harness.api_port(), "/v1/chat/completions", support.dump()).status, 200);
    fleet.wait_synced("a");
    auto prediction = Fleet::predicted(fleet.route(support), "a");
    EXPECT_GT(prediction, 0u);
    EXPECT_EQ(prediction, fleet.engine_cached("a", support));
    for (const char* other : {"sim-model", "sql-bot"}) {
      auto request = chat_request(messages);
      request["model"] = other;
      EXPECT_EQ(Fleet::predicted(fleet.route(request), "a"), 0u) << other;
      EXPECT_EQ(fleet.engine_cached("a", request), 0u) << other;
    }
    auto unknown = chat_request(messages);
    unknown["model"] = "no-such-adapter";
    auto refused = post_json(fleet.harness.api_port(), "/v1/chat/completions", unknown.dump());
    EXPECT_EQ(refused.status, 404);
    EXPECT_EQ(json::parse(refused.body)["error"]["code"], "model_not_found");
  }
}

// A hybrid-attention model (one full group, one sliding window of 64
// tokens) on a pool small enough to evict: the engine's events name the
// groups, the index learns the layout from them, and every routed
// request's receipt predicts the cached tokens the engine then reports,
// where the full-attention group alone (the receipt's full_attention_cached)
// claims more at least once. The drift detector stays quiet.
TEST(KvIndex, AHybridModelsHitNeedsTheSlidingWindowBeforeIt) {
  Fleet fleet;
  fleet.add_sim("a", "map", true,
                {"--kv-groups", "full,sliding_window:64", "--num-gpu-blocks", "200", "--max-model-len", "1024"});
  fleet.start_gateway();
  const std::string system =
      "You are a patient assistant for home repairs. Answer briefly, name the tools and parts, and warn about "
      "water and electricity where they are involved. ";
  std::vector<json> conversations;
  for (int conversation = 0; conversation < 6; ++conversation) {
    conversations.push_back(json::array({{{"role", "system"}, {"content", system}}}));
  }
  int requests = 0;
  int exact = 0;
  int full_only_over = 0;
  for (int turn = 0; turn < 4; ++turn) {
    for (std::size_t conversation = 0; conversation < conversations.size(); ++conversation) {
      auto& messages = conversations[conversation];
      messages.push_back({{"role", "user"},
                          {"content", "Question " + std::to_string(turn) + " of household " +
                                          std::to_string(conversation) + ": how do I fix the " +
                                          std::string(40 + 13 * ((turn + conversation) % 5), 'x') + " part?"}});
      auto body = chat_request(messages);
      body["max_tokens"] = 24 + 16 * ((turn * 3 + conversation) % 4);
      auto response =
          post_json(fleet.harness.api_port(), "/v1/chat/completions", body.dump(), {{"x-kvgate-explain", "1"}});
      ASSERT_EQ(response.status, 200) << response.body;
      auto answer = json::parse(response.body);
      auto receipt = response.header("x-kvgate-route");
      auto field = [&](const std::string& name) -> std::optional<std::uint32_t> {
        auto at = receipt.find(name + "=");
        if (at == std::string::npos) {
          return std::nullopt;
        }
        return static_cast<std::uint32_t>(std::stoul(receipt.substr(at + name.size() + 1)));
      };
      const auto reported = answer["usage"]["prompt_tokens_details"]["cached_tokens"].get<std::uint32_t>();
      ++requests;
      exact += field("predicted_cached") == reported ? 1 : 0;
      full_only_over += field("full_attention_cached").value_or(0) > reported ? 1 : 0;
      EXPECT_EQ(field("predicted_cached"), reported) << "request " << requests << ": " << receipt;
      messages.push_back({{"role", "assistant"}, {"content", answer["choices"][0]["message"]["content"]}});
      fleet.wait_synced("a");
    }
  }
  EXPECT_EQ(exact, requests);
  EXPECT_GT(full_only_over, 0) << "the pool never evicted a window the full group kept";
  EXPECT_EQ(fleet.route(chat_request(conversations[0]))["attention"], "sliding_window 64");
  EXPECT_EQ(fleet.worker("a")["drifting"], false);
}

// An engine serving an adapter the model does not list: its blocks are
// counted and not indexed (no request can name it), and the listed
// adapter's partition is untouched.
TEST(KvIndex, BlocksOfAnAdapterNobodyListedAreCountedNotIndexed) {
  Fleet fleet;
  fleet.adapters = {"support-bot"};
  fleet.add_sim("a", "map", true, {"--lora-adapters", "support-bot,sql-bot"});
  fleet.start_gateway();
  const auto before = fleet.worker("a")["index"]["blocks"].get<std::uint64_t>();
  auto unlisted = chat_request(first_turn("Which index speeds up a join on two date columns?"));
  unlisted["model"] = "sql-bot";
  ASSERT_EQ(post_json(fleet.sim("a").port(), "/v1/chat/completions", unlisted.dump()).status, 200);
  fleet.wait_synced("a");
  EXPECT_EQ(fleet.worker("a")["index"]["blocks"].get<std::uint64_t>(), before);
  auto metrics = get(fleet.harness.admin_port(), "/metrics").body;
  EXPECT_EQ(metrics.find("kvgate_index_unindexable_blocks_total{worker=\"a\"} 0"), std::string::npos) << metrics;
  EXPECT_NE(metrics.find("kvgate_index_unindexable_blocks_total{worker=\"a\"}"), std::string::npos);
  auto listed = chat_request(first_turn("Which index speeds up a join on two date columns?"));
  listed["model"] = "support-bot";
  ASSERT_EQ(post_json(fleet.harness.api_port(), "/v1/chat/completions", listed.dump()).status, 200);
  fleet.wait_synced("a");
  EXPECT_GT(fleet.worker("a")["index"]["blocks"].get<std::uint64_t>(), before);
}

// SGLang names an adapter with "lora_path" beside the base model, or as
// "base:adapter", and its events carry only the adapter's number: kvgate
// routes both forms to the adapter's partition, and the engine's adapter
// blocks are never credited to the base model.
TEST(KvIndex, SglangsWaysOfNamingAnAdapterKeepItsPartition) {
  Fleet fleet;
  fleet.adapters = {"support-bot"};
  fleet.add_sim("a", "sglang", true, {"--engine-profile", "sglang", "--lora-adapters", "support-bot"});
  fleet.start_gateway();
  auto messages = first_turn("Which grout suits a shower floor that flexes a little?");
  auto by_path = chat_request(messages);
  by_path["lora_path"] = "support-bot";
  auto response = post_json(fleet.harness.api_port(), "/v1/chat/completions", by_path.dump());
  ASSERT_EQ(response.status, 200) << response.body;
  fleet.wait_synced("a");
  auto base = chat_request(messages);
  EXPECT_EQ(Fleet::predicted(fleet.route(base), "a"), 0u);
  EXPECT_EQ(fleet.engine_cached("a", base), 0u);
  auto by_name = chat_request(messages);
  by_name["model"] = "sim-model:support-bot";
  response = post_json(fleet.harness.api_port(), "/v1/chat/completions", by_name.dump());
  ASSERT_EQ(response.status, 200) << response.body;
  EXPECT_GT(json::parse(response.body)["usage"]["prompt_tokens_details"]["cached_tokens"].get<int>(), 0);
  auto unknown = chat_request(messages);
  unknown["lora_path"] = "ops-bot";
  response = post_json(fleet.harness.api_port(), "/v1/chat/completions", unknown.dump());
  EXPECT_EQ(response.status, 404);
  EXPECT_EQ(json::parse(response.body)["error"]["code"], "model_not_found");
}

// models[].discover_adapters: the adapters the engine lists on the model
// in /v1/models become routing keys without configuring them.
TEST(KvIndex, AdaptersTheEngineListsAreDiscovered) {
  Fleet fleet;
  fleet.model_settings = "    discover_adapters: true\n";
  fleet.add_sim("a", "map", true, {"--lora-adapters", "support-bot,sql-bot"});
  fleet.start_gateway("metrics_scrape: {interval: 100ms}\n");
  json models;
  const auto deadline = std::chrono::steady_clock::now() + 15s;
  while (std::chrono::steady_clock::now() < deadline) {
    models = json::parse(get(fleet.harness.api_port(), "/v1/models").body)["data"];
    if (models.size() == 3) {
      break;
    }
    std::this_thread::sleep_for(50ms);  // polling the gateway for what it read from the engine
  }
  ASSERT_EQ(models.size(), 3u) << models.dump();
  EXPECT_EQ(models[1]["id"], "support-bot");
  EXPECT_EQ(models[1]["parent"], "sim-model");
  auto sql = chat_request(first_turn("Which index speeds up a join on two date columns?"));
  sql["model"] = "sql-bot";
  ASSERT_EQ(post_json(fleet.harness.api_port(), "/v1/chat/completions", sql.dump()).status, 200);
  fleet.wait_synced("a");
  auto prediction = Fleet::predicted(fleet.route(sql), "a");
  EXPECT_GT(prediction, 0u);
  EXPECT_EQ(prediction, fleet.engine_cached("a", sql));
}

TEST(KvIndex, EvictionAndCacheResetEmptyTheWorkersEntries) {
  Fleet fleet;
  fleet.add_sim("a");
  fleet.start_gateway();
  auto request = chat_request(first_turn("Which screws hold a 20 kg shelf on a plasterboard wall?"));
  fleet.turn(request["messages"]);
  fleet.wait_synced("a");
  EXPECT_GT(Fleet::predicted(fleet.route(request), "a"), 0u);
  const auto held = fleet.worker("a")["index"]["blocks"].get<std::uint64_t>();
  EXPECT_GT(held, 0u);
  EXPECT_EQ(fleet.worker("a")["index"]["evicted_blocks"], 0);

  fleet.sim("a").fault({{"mode", "evict_all"}});
  fleet.wait_synced("a");
  EXPECT_EQ(Fleet::predicted(fleet.route(request), "a"), 0u);
  EXPECT_EQ(fleet.worker("a")["index"]["blocks"], 0);
  // /debug/workers shows what the engine reported freeing.
  EXPECT_EQ(fleet.worker("a")["index"]["evicted_blocks"].get<std::uint64_t>(), held);

  fleet.turn(request["messages"]);
  fleet.wait_synced("a");
  EXPECT_GT(fleet.worker("a")["index"]["blocks"].get<int>(), 0);
  ASSERT_EQ(post_json(fleet.sim("a").port(), "/reset_prefix_cache", "").status, 200);
  fleet.wait_synced("a");
  EXPECT_EQ(fleet.worker("a")["index"]["blocks"], 0);
  auto after_reset = fleet.route(request);
  EXPECT_EQ(Fleet::predicted(after_reset, "a"), fleet.engine_cached("a", request))
      << after_reset.dump() << fleet.worker("a").dump();
}

TEST(KvIndex, AGapIsClosedByReplay) {
  Fleet fleet;
  fleet.add_sim("a");
  fleet.start_gateway();
  // Traffic first: a gap at the very start looks like a late join.
  fleet.turn(first_turn("Which brush is best for gloss paint?"));
  fleet.wait_synced("a");
  // A subscription that reached the publisher late was already replayed
  // from 0 (a late join, not a gap): count from here.
  const auto before = fleet.worker("a")["kv_events"];
  auto first = first_turn("What grit of sandpaper should I use before painting a door?");
  fleet.sim("a").fault({{"mode", "drop_batches"}, {"count", 2}});
  auto [worker, answer] = fleet.turn(first);
  fleet.turn(first_turn("A second question so that a batch after the dropped ones arrives."));
  fleet.wait_synced("a");
  auto state = fleet.worker("a");
  EXPECT_EQ(state["kv_events"]["gaps"], 1) << state.dump();
  EXPECT_EQ(state["kv_events"]["replays"].get<int>() - before["replays"].get<int>(), 1) << before.dump();
  EXPECT_EQ(state["kv_events"]["failed_replays"], before["failed_replays"]);
  EXPECT_EQ(state["kv_events"]["stale"], false);
  auto follow_up = chat_request(second_turn(first, answer, "And for varnish?"));
  auto route = fleet.route(follow_up);
  EXPECT_EQ(Fleet::predicted(route, "a"), fleet.engine_cached("a", follow_up)) << route.dump() << state.dump();
  auto metrics = get(fleet.harness.admin_port(), "/metrics").body;
  EXPECT_NE(metrics.find("kvgate_kv_event_gaps_total{worker=\"a\"} 1"), std::string::npos) << metrics;
  const auto closed = before["replays"].get<int>() - before["failed_replays"].get<int>() + 1;
  EXPECT_NE(metrics.find("kvgate_kv_event_replays_total{outcome=\"closed\",worker=\"a\"} " + std::to_string(closed)),
            std::string::npos)
      << metrics;
}

TEST(KvIndex, AGapWithoutReplayMarksTheWorkerStale) {
  Fleet fleet;
  fleet.add_sim("a", "map", /*replay=*/false);
  fleet.start_gateway();
  fleet.turn(first_turn("Which glue holds oak best?"));
  fleet.wait_synced("a");
  fleet.sim("a").fault({{"mode", "drop_batches"}, {"count", 1}});
  fleet.turn(first_turn("How long does wood glue need to dry?"));
  fleet.turn(first_turn("Can I paint over it the same day?"));
  fleet.wait_synced("a");
  auto state = fleet.worker("a");
  EXPECT_EQ(state["kv_events"]["gaps"], 1) << state.dump();
  EXPECT_EQ(state["kv_events"]["stale"], true);
  EXPECT_EQ(state["mode"], "stale");
  EXPECT_NE(get(fleet.harness.admin_port(), "/metrics").body.find("kvgate_kv_events_stale{worker=\"a\"} 1"),
            std::string::npos);
}

TEST(KvIndex, AnEngineRestartDropsTheWorkersEntries) {
  Fleet fleet;
  fleet.add_sim("a");
  fleet.start_gateway();
  auto request = chat_request(first_turn("Is a 10 mm masonry bit right for a wall plug of 8 mm?"));
  fleet.turn(request["messages"]);
  fleet.wait_synced("a");
  EXPECT_GT(Fleet::predicted(fleet.route(request), "a"), 0u);
  fleet.sim("a").fault({{"mode", "restart"}});
  // The restarted engine's first batch (sequence 0) tells the gateway.
  post_json(fleet.sim("a").port(), "/v1/completions",
            json{{"model", "sim-model"}, {"prompt", std::string(100, 'z')}, {"max_tokens", 1}}.dump());
  fleet.wait_until("a", [](const json& worker) { return worker["kv_events"]["resets"] == 1; });
  fleet.wait_synced("a");
  EXPECT_EQ(Fleet::predicted(fleet.route(request), "a"), 0u);
  EXPECT_EQ(fleet.engine_cached("a", request), 0u);
}

TEST(KvIndex, APublisherThatDiesAndComesBackIsFollowedAgain) {
  Fleet fleet;
  fleet.add_sim("a", "array");
  fleet.start_gateway();
  auto request = chat_request(first_turn("What is the difference between a jigsaw and a circular saw?"));
  fleet.turn(request["messages"]);
  fleet.wait_synced("a");
  fleet.replace_sim("a", "array");
  fleet.warm_up("a");
  // The health checks may have caught the moment between the two processes:
  // wait until the worker is routable again (two good checks).
  fleet.wait_until("a", [](const json& worker) { return worker["healthy"] == true; });
  fleet.turn(request["messages"]);
  fleet.wait_synced("a");
  auto state = fleet.worker("a");
  EXPECT_EQ(state["kv_events"]["resets"], 1) << state.dump();
  // The new process cached the prompt once; the index knows exactly that.
  auto follow_up = chat_request(second_turn(request["messages"], "tok0", "Thanks!"));
  auto route = fleet.route(follow_up);
  EXPECT_EQ(Fleet::predicted(route, "a"), fleet.engine_cached("a", follow_up)) << route.dump() << state.dump();
}

TEST(KvIndex, AWorkerWhoseEventsNeverComeIsFlaggedSilent) {
  Fleet fleet;
  fleet.add_sim("a", "map", /*replay=*/false);
  RefusingPort nobody;
  fleet.start_gateway("kv_events: {silence_after: 300ms}\n", "tcp://127.0.0.1:" + std::to_string(nobody.port()));
  fleet.turn(first_turn("Do I need a primer on bare plaster?"));
  fleet.wait_until("a", [](const json& worker) { return worker["kv_events"]["silent"] == true; });
  EXPECT_EQ(fleet.worker("a")["kv_events"]["connected"], false);
  EXPECT_NE(get(fleet.harness.admin_port(), "/metrics").body.find("kvgate_kv_events_silent{worker=\"a\"} 1"),
            std::string::npos);
}

}  // namespace
}  // namespace kvgate::testing

namespace kvgate::testing {
namespace {

// A worker without kv_events: the gateway's own routing history is its
// model of the cache, bounded by the KV capacity the engine's metrics report.
TEST(KvIndexApproximate, RoutingHistoryIsBoundedByTheScrapedCapacity) {
  Harness harness;
  SimProcess sim(harness, {"--num-gpu-blocks", "8", "--max-model-len", "128"});
  harness.start_gateway("routing: {policy: cache_aware}\nmetrics_scrape: {interval: 100ms}\n",
                        "models:\n  - name: \"sim-model\"\n    block_size: 16\n    workers:\n      - id: \"a\"\n"
                        "        url: \"" +
                            sim.url() + "\"\n");
  auto worker = [&] { return json::parse(get(harness.admin_port(), "/debug/workers").body)["workers"][0]; };
  for (int attempt = 0; attempt < 200 && worker()["engine"].is_null(); ++attempt) {
    std::this_thread::sleep_for(20ms);  // polling for the first scrape
  }
  auto state = worker();
  ASSERT_FALSE(state["engine"].is_null()) << state.dump();
  EXPECT_EQ(state["engine"]["num_gpu_blocks"], 8);
  EXPECT_EQ(state["engine"]["block_size"], 16);
  EXPECT_EQ(state["mode"], "approximate");
  EXPECT_TRUE(state["kv_events"].is_null());

  // Three prompts of three full blocks each: nine blocks routed, eight kept.
  for (int prompt = 0; prompt < 3; ++prompt) {
    json body = {{"model", "sim-model"},
                 {"max_tokens", 1},
                 {"prompt", "prompt " + std::to_string(prompt) + std::string(200, static_cast<char>('a' + prompt))}};
    ASSERT_EQ(post_json(harness.api_port(), "/v1/completions", body.dump()).status, 200);
  }
  for (int attempt = 0; attempt < 200 && worker()["index"]["assumed_blocks"] != 8; ++attempt) {
    std::this_thread::sleep_for(20ms);  // the writer publishes its counts every 100 ms
  }
  EXPECT_EQ(worker()["index"]["assumed_blocks"], 8) << worker().dump();
  EXPECT_EQ(worker()["index"]["blocks"], 8);
  auto metrics = get(harness.admin_port(), "/metrics").body;
  EXPECT_NE(metrics.find("kvgate_worker_scrapes_total{result=\"success\",worker=\"a\"}"), std::string::npos);
  // The ninth block was trimmed as the engine's full cache would evict it.
  EXPECT_NE(metrics.find("kvgate_index_evictions_total 1"), std::string::npos) << metrics;
}

}  // namespace
}  // namespace kvgate::testing

namespace kvgate::testing {
namespace {

std::vector<std::string> stream_events(int port, const json& body) {
  EventStream stream(port, "/v1/chat/completions", body.dump());
  EXPECT_EQ(stream.status(), 200);
  return stream.rest();
}

bool has_usage_event(const std::vector<std::string>& events) {
  return std::any_of(events.begin(), events.end(),
                     [](const std::string& event) { return event.find("\"usage\":{") != std::string::npos; });
}

// kvgate asks streaming engines for usage to learn their cached tokens, and
// the client still gets exactly the stream it asked for.
TEST(KvIndexUsage, PredictionsAreCheckedAgainstTheEnginesUsageWithoutChangingTheClientsStream) {
  Fleet fleet;
  fleet.add_sim("a");
  auto log = fleet.harness.folder() + "/decisions.jsonl";
  fleet.start_gateway("decision_log: \"" + log + "\"\n");
  auto first = first_turn("Which hinges suit a heavy oak door?");
  auto [worker, answer] = fleet.turn(first);
  fleet.wait_synced("a");

  auto follow_up = chat_request(second_turn(first, answer, "And how many?"));
  follow_up["stream"] = true;
  auto events = stream_events(fleet.harness.api_port(), follow_up);
  ASSERT_FALSE(events.empty());
  EXPECT_EQ(events.back(), "[DONE]");
  EXPECT_FALSE(has_usage_event(events));  // the client did not ask

  follow_up["stream_options"] = {{"include_usage", true}};
  EXPECT_TRUE(has_usage_event(stream_events(fleet.harness.api_port(), follow_up)));  // it asked

  // The gateway counts a request once its last byte is written, which can be
  // just after the client has read it.
  const std::string three_exact = "kvgate_cache_predictions_total{outcome=\"exact\",worker=\"a\"} 3";
  auto metrics = get(fleet.harness.admin_port(), "/metrics").body;
  for (int attempt = 0; attempt < 100 && metrics.find(three_exact) == std::string::npos; ++attempt) {
    std::this_thread::sleep_for(20ms);  // polling a remote process's counters
    metrics = get(fleet.harness.admin_port(), "/metrics").body;
  }
  EXPECT_NE(metrics.find(three_exact), std::string::npos) << metrics;
  EXPECT_NE(metrics.find("kvgate_cache_predictions_total{outcome=\"over\",worker=\"a\"} 0"), std::string::npos);
  EXPECT_NE(metrics.find("kvgate_cache_predictions_total{outcome=\"under\",worker=\"a\"} 0"), std::string::npos);

  // The decision log has the engine's figures next to the prediction.
  fleet.harness.gateway().send_signal(SIGHUP);  // reopens, so the lines so far are flushed
  std::vector<json> records;
  for (int attempt = 0; attempt < 100 && records.size() < 3; ++attempt) {
    std::this_thread::sleep_for(20ms);  // the decision log is written by a background thread
    records.clear();
    std::ifstream file(log);
    for (std::string line; std::getline(file, line);) {
      records.push_back(json::parse(line));
    }
  }
  ASSERT_EQ(records.size(), 3u);
  for (const auto& record : records) {
    EXPECT_EQ(record["predicted_cached_tokens"], record["cached_tokens"]) << record.dump();
    EXPECT_GT(record["output_tokens"].get<int>(), 0);
  }
  EXPECT_GT(records[1]["cached_tokens"].get<int>(), 0);
}

}  // namespace
}  // namespace kvgate::testing

namespace kvgate::testing {
namespace {

std::uint64_t scrapes(const std::string& metrics, const std::string& result, const std::string& worker) {
  const std::string series = "kvgate_worker_scrapes_total{result=\"" + result + "\",worker=\"" + worker + "\"} ";
  auto at = metrics.find(series);
  return at == std::string::npos ? 0 : std::stoull(metrics.substr(at + series.size()));
}

// An engine that serves /metrics behind inference (llama.cpp) answers late
// when busy: its scrapes time out, the next ones back off and are never
// piled on a page still being served, the worker stays healthy and keeps
// its traffic, and the other worker's own schedule is untouched.
TEST(MetricsScrape, ASlowEndpointBacksOffWithoutTouchingHealth) {
  Harness harness;
  SimProcess slow(harness, {}, "slow");
  SimProcess quick(harness, {}, "quick");
  slow.fault({{"mode", "slow_metrics"}, {"delay_ms", 400}});
  harness.start_gateway(
      "routing: {policy: round_robin}\nhealth_check: {interval: 100ms}\n"
      "metrics_scrape: {interval: 100ms, timeout: 1s, max_backoff: 800ms}\n",
      "models:\n  - name: \"sim-model\"\n    block_size: 16\n    workers:\n"
      "      - {id: slow, url: \"" +
          slow.url() +
          "\", scrape_interval: 100ms, scrape_timeout: 50ms}\n"
          "      - {id: quick, url: \"" +
          quick.url() + "\"}\n");
  std::string metrics;
  for (int attempt = 0; attempt < 200; ++attempt) {
    metrics = get(harness.admin_port(), "/metrics").body;
    if (scrapes(metrics, "failure", "slow") >= 3 && scrapes(metrics, "success", "quick") >= 10) {
      break;
    }
    std::this_thread::sleep_for(20ms);  // polling the gateway's own scrape rounds
  }
  const auto failures = scrapes(metrics, "failure", "slow");
  const auto successes = scrapes(metrics, "success", "quick");
  ASSERT_GE(failures, 3u) << metrics;
  ASSERT_GE(successes, 10u) << metrics;
  // Backing off: over the time the quick worker was scraped `successes`
  // times at 100 ms, the slow one was tried far fewer times (waits of 200,
  // 400, 800, 800 ... ms after each failure).
  EXPECT_LT(failures, successes / 2) << metrics;
  EXPECT_EQ(scrapes(metrics, "success", "slow"), 0u);
  // Health and traffic are untouched: both workers answer, round robin
  // alternates between them.
  std::set<std::string> served;
  for (int request = 0; request < 4; ++request) {
    auto response = post_json(harness.api_port(), "/v1/completions",
                              json{{"model", "sim-model"}, {"max_tokens", 1}, {"prompt", "hello"}}.dump());
    ASSERT_EQ(response.status, 200) << response.body;
    served.insert(response.header("x-kvgate-worker"));
  }
  EXPECT_EQ(served, (std::set<std::string>{"slow", "quick"}));
  auto workers = json::parse(get(harness.admin_port(), "/debug/workers").body)["workers"];
  for (const auto& worker : workers) {
    EXPECT_EQ(worker["healthy"], true) << worker.dump();
  }
  // Once it answers in time again, it is scraped again.
  slow.fault({{"mode", "none"}});
  for (int attempt = 0; attempt < 200 && scrapes(metrics, "success", "slow") == 0; ++attempt) {
    std::this_thread::sleep_for(20ms);
    metrics = get(harness.admin_port(), "/metrics").body;
  }
  EXPECT_GT(scrapes(metrics, "success", "slow"), 0u) << metrics;
}

}  // namespace
}  // namespace kvgate::testing
