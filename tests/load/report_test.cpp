#include "report.hpp"

#include <gtest/gtest.h>

namespace kvgate::load {
namespace {

RequestRecord record(std::size_t session, std::uint32_t turn, std::uint32_t prompt, std::uint32_t cached,
                     std::string worker, double ttft) {
  RequestRecord result;
  result.session = session;
  result.turn = turn;
  result.status = 200;
  result.worker = std::move(worker);
  result.prompt_tokens = prompt;
  result.cached_tokens = cached;
  result.ttft_ms = ttft;
  result.latency_ms = ttft + 10;
  return result;
}

TEST(Report, HitRatesByTurnAndPerSessionAfterTheFirstTurn) {
  std::vector<RequestRecord> records{record(0, 0, 100, 0, "a", 10), record(0, 1, 200, 100, "a", 20),
                                     record(1, 0, 100, 50, "b", 30), record(1, 1, 200, 200, "a", 40)};
  RequestRecord failed;
  failed.error = "status_503";
  records.push_back(failed);
  auto summary = summarize({"run", "http://x", "chat", 2.0}, records);
  EXPECT_EQ(summary["requests"], 5);
  EXPECT_EQ(summary["errors"], 1);
  EXPECT_EQ(summary["error_kinds"]["status_503"], 1);
  EXPECT_DOUBLE_EQ(summary["hit_rate"].get<double>(), 350.0 / 600.0);
  ASSERT_EQ(summary["hit_rate_by_turn"].size(), 2u);
  EXPECT_EQ(summary["hit_rate_by_turn"][0]["turn"], 1);
  EXPECT_DOUBLE_EQ(summary["hit_rate_by_turn"][0]["hit_rate"].get<double>(), 0.25);
  EXPECT_DOUBLE_EQ(summary["hit_rate_by_turn"][1]["hit_rate"].get<double>(), 0.75);
  // Sessions after turn 1: 50% and 100%.
  EXPECT_DOUBLE_EQ(summary["session_hit_rate_after_first_turn"]["mean"].get<double>(), 0.75);
  EXPECT_DOUBLE_EQ(summary["ttft_ms"]["p50"].get<double>(), 20);
  EXPECT_DOUBLE_EQ(summary["ttft_ms"]["p99"].get<double>(), 40);
  EXPECT_DOUBLE_EQ(summary["requests_per_second"].get<double>(), 2.0);
  // a: 3 of 4 requests against an even 2.
  EXPECT_DOUBLE_EQ(summary["worker_imbalance"].get<double>(), 1.5);
}

TEST(Report, RunsSideBySideWithRatiosToTheFirst) {
  auto base = summarize({"sticky", "u", "chat", 1}, {record(0, 0, 100, 20, "a", 10), record(0, 1, 100, 40, "a", 10)});
  auto better = summarize({"aware", "u", "chat", 1}, {record(0, 0, 100, 40, "a", 5), record(0, 1, 100, 80, "a", 5)});
  auto markdown = markdown_report({base, better});
  EXPECT_NE(markdown.find("| sticky | 2 | 0 | 30.0% |"), std::string::npos) << markdown;
  EXPECT_NE(markdown.find("| aware | 2.00x | 0.50x |"), std::string::npos) << markdown;
  EXPECT_NE(markdown.find("| 2 | 40.0% | 80.0% |"), std::string::npos) << markdown;
  // A trace (no second turns) shows no per-session figure.
  auto trace = summarize({"trace", "u", "t", 1}, {record(0, 0, 100, 10, "a", 1), record(1, 0, 100, 10, "b", 1)});
  EXPECT_NE(markdown_report({trace}).find("| trace | 2 | 0 | 10.0% | - |"), std::string::npos)
      << markdown_report({trace});
  auto html = html_report({base, better});
  EXPECT_EQ(html.rfind("<!doctype html>", 0), 0u);
  EXPECT_NE(html.find("<polyline"), std::string::npos);
  EXPECT_EQ(html.find("<script"), std::string::npos);
}

}  // namespace
}  // namespace kvgate::load
