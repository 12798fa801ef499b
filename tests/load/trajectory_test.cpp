#include "trajectory.hpp"

#include <gtest/gtest.h>

#include <string>

#include "report.hpp"

namespace kvgate::load {
namespace {

using nlohmann::json;

// A /debug/sessions/<key> export: each turn's prompt at its recorded
// length, extending the one before.
TEST(Trajectory, AnExportBecomesPromptsOfTheRecordedLengths) {
  const std::string exported =
      R"({"key": "agent-1", "key_source": "header:x-claude-code-session-id", "turns": [
          {"turn": 1, "input_tokens": 100, "cached_tokens": 0},
          {"turn": 2, "input_tokens": 160, "cached_tokens": 96},
          {"turn": 3, "input_tokens": 240}]})";
  WorkloadOptions options;
  auto session = parse_trajectory(exported, "", options);
  ASSERT_TRUE(session) << session.error();
  EXPECT_EQ(session->id, "agent-1");
  ASSERT_EQ(session->turns.size(), 3u);
  EXPECT_EQ(session->turns[0].prompt.size(), 400u);  // 4 bytes a token
  EXPECT_EQ(session->turns[2].prompt.size(), 960u);
  EXPECT_EQ(session->turns[1].prompt.substr(0, 400), session->turns[0].prompt);
  EXPECT_EQ(session->turns[2].prompt.substr(0, 640), session->turns[1].prompt);

  auto bad = parse_trajectory(R"({"turns": [{"turn": 1, "input_tokens": 10}, {"turn": 2}]})", "", options);
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().find("turn 2"), std::string::npos) << bad.error();
}

// Session JSON lines and WEKA's recorded sessions: the one named, else the
// first; a malformed line is reported by its number.
TEST(Trajectory, SessionFilesAreReadStrictlyAndByName) {
  WorkloadOptions options;
  const std::string sessions = R"({"id": "s1", "system": "Be brief.", "turns": [{"user": "hi"}, {"user": "more"}]})"
                               "\n"
                               R"({"id": "s2", "system": "Be brief.", "turns": [{"user": "hello"}]})"
                               "\n";
  EXPECT_EQ(parse_trajectory(sessions, "", options)->id, "s1");
  EXPECT_EQ(parse_trajectory(sessions, "s2", options)->turns.size(), 1u);
  auto missing = parse_trajectory(sessions, "s9", options);
  ASSERT_FALSE(missing);
  EXPECT_NE(missing.error().find("no session 's9'"), std::string::npos);
  auto broken = parse_trajectory(sessions + "{\"id\": \"s3\", \"turns\": [\n", "", options);
  ASSERT_FALSE(broken);
  EXPECT_NE(broken.error().find("line 3"), std::string::npos) << broken.error();
  EXPECT_FALSE(parse_trajectory("   \n", "", options));
  auto trace =
      parse_trajectory(R"({"timestamp": 0, "input_length": 5, "output_length": 1, "hash_ids": [0]})", "", options);
  ASSERT_FALSE(trace);
  EXPECT_NE(trace.error().find("not a session"), std::string::npos);
}

TEST(Trajectory, ReadsTheReceiptAndTheEnginesKvUsage) {
  EXPECT_EQ(receipt_predicted_cached("worker=r1; reason=sticky; predicted_cached=448; runner_up=r0; gap_ms=3.0"), 448u);
  EXPECT_FALSE(receipt_predicted_cached(""));
  EXPECT_FALSE(receipt_predicted_cached("worker=r1; predicted_cached=x"));
  EXPECT_EQ(kv_usage_from_metrics("# HELP vllm:kv_cache_usage_perc KV-cache usage.\n"
                                  "vllm:kv_cache_usage_perc{engine=\"0\",model_name=\"a b\"} 0.25\n"
                                  "vllm:num_requests_running 3\n"),
            0.25);
  EXPECT_EQ(kv_usage_from_metrics("sglang:token_usage 0.5 1700000000\n"), 0.5);
  EXPECT_FALSE(kv_usage_from_metrics("vllm:num_requests_running 3\nvllm:kv_cache_usage_perc 7\n"));
  EXPECT_EQ(cold_replica({"r0", "r1"}, "r0"), 1u);
  EXPECT_EQ(cold_replica({"r0", "r1"}, "r1"), 0u);
  EXPECT_FALSE(cold_replica({"r0"}, "r0"));
}

TrajectoryTurn answered(std::uint32_t number, const std::string& worker, std::uint32_t input, std::uint32_t cached,
                        double ttft_ms) {
  TrajectoryTurn turn;
  turn.number = number;
  turn.worker = worker;
  turn.input_tokens = input;
  turn.cached_tokens = cached;
  turn.ttft_ms = ttft_ms;
  turn.decode_ms = 5;
  return turn;
}

TEST(Trajectory, SummarisesEachModeAndWhatTheColdTurnCost) {
  TrajectoryRun sticky{"cache_aware", TrajectoryMode::sticky, {}, ""};
  sticky.turns = {answered(1, "r0", 1000, 0, 80), answered(2, "r0", 1200, 992, 12), answered(3, "r0", 1400, 1184, 14)};
  TrajectoryRun cold{"cache_aware", TrajectoryMode::cold_second_turn, {}, ""};
  cold.turns = {answered(1, "r0", 1000, 0, 80), answered(2, "r1", 1200, 0, 95), answered(3, "r1", 1400, 1184, 14)};
  cold.turns[1].direct = true;
  cold.turns[1].kv_usage = 0.5;
  auto trajectory = trajectory_json("s1", {sticky, cold}, {{"workload", "w.jsonl"}});
  ASSERT_EQ(trajectory["targets"].size(), 1u);
  const auto& target = trajectory["targets"][0];
  const auto& warm = target["modes"][0]["summary"];
  EXPECT_NEAR(warm["hit_rate_after_first"].get<double>(), (992.0 + 1184) / (1200 + 1400), 1e-9);
  EXPECT_EQ(warm["prefill_tokens_computed"], 1000 + 208 + 216);
  EXPECT_EQ(warm["worker_changes"], 0);
  EXPECT_EQ(target["modes"][1]["summary"]["worker_changes"], 1);
  const auto& cost = target["cold_second_turn_cost"];
  EXPECT_EQ(cost["extra_ttft_ms"], 83.0);
  EXPECT_EQ(cost["extra_prefill_tokens"], 992);
  EXPECT_EQ(cost["cold_worker"], "r1");

  const auto markdown = trajectory_markdown(trajectory);
  EXPECT_NE(markdown.find("| sticky | 3/3 | 83.7% |"), std::string::npos) << markdown;
  EXPECT_NE(markdown.find("r1 (direct)"), std::string::npos);
  EXPECT_NE(markdown.find("+83.0 ms"), std::string::npos);
  const auto html = trajectory_html(trajectory);
  EXPECT_NE(html.find("data-chart='trajectory-cache-aware'"), std::string::npos);
  EXPECT_NE(html.find("data-chart='trajectory-hits-cache-aware'"), std::string::npos);
}

}  // namespace
}  // namespace kvgate::load
