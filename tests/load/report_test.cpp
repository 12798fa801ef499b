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

TEST(Report, RunsSideBySideWithRatiosToTheBaselines) {
  auto base = summarize({"sticky", "u", "chat", 1}, {record(0, 0, 100, 20, "a", 10), record(0, 1, 100, 40, "a", 10)});
  auto better = summarize({"aware", "u", "chat", 1}, {record(0, 0, 100, 40, "a", 5), record(0, 1, 100, 80, "a", 5)});
  auto markdown = markdown_report({base, better});
  EXPECT_NE(markdown.find("| sticky | 2 | 0 | 30.0% | - |"), std::string::npos) << markdown;
  // Hit rate 2x, prefill computed (140 -> 80 tokens), TTFT halved.
  EXPECT_NE(markdown.find("| aware | 2.00x | 0.57x | 0.50x | 0.50x | 0.50x | 0.50x |"), std::string::npos) << markdown;
  EXPECT_NE(markdown.find("| 2 | 40.0% | 80.0% |"), std::string::npos) << markdown;
  // Several baselines: one ratio table each, the named ones only.
  auto third = summarize({"other", "u", "chat", 1}, {record(0, 0, 100, 0, "a", 20), record(0, 1, 100, 0, "a", 20)});
  auto two = markdown_report({better, base, third}, {{"baselines", {"sticky", "other"}}});
  EXPECT_NE(two.find("Against `sticky`"), std::string::npos) << two;
  EXPECT_NE(two.find("Against `other`"), std::string::npos) << two;
  EXPECT_EQ(two.find("Against `aware`"), std::string::npos) << two;
  // A trace (no second turns) shows no per-session figure.
  auto trace = summarize({"trace", "u", "t", 1}, {record(0, 0, 100, 10, "a", 1), record(1, 0, 100, 10, "b", 1)});
  EXPECT_NE(markdown_report({trace}).find("| trace | 2 | 0 | 10.0% | - | - |"), std::string::npos)
      << markdown_report({trace});
}

// Sub-agents' requests have their own figures (siblings: forks of several)
// and stay out of the session's turn figures.
TEST(Report, SubagentsAndSiblingsHaveTheirOwnFigures) {
  auto subagent = [](std::uint32_t number, std::uint32_t fork_size, double ttft) {
    auto one = record(0, 0, 100, 50, "b", ttft);
    one.subagent = number;
    one.fork_size = fork_size;
    return one;
  };
  auto piled = summarize({"sticky", "u", "w", 1},
                         {record(0, 0, 100, 0, "a", 10), subagent(1, 2, 40), subagent(2, 2, 60), subagent(1, 1, 20)});
  EXPECT_EQ(piled["subagents"]["requests"], 3);
  EXPECT_DOUBLE_EQ(piled["subagents"]["ttft_mean_ms"].get<double>(), 40.0);
  EXPECT_EQ(piled["subagents"]["sibling_requests"], 2);
  EXPECT_DOUBLE_EQ(piled["subagents"]["sibling_ttft_mean_ms"].get<double>(), 50.0);
  ASSERT_EQ(piled["hit_rate_by_turn"].size(), 1u);
  EXPECT_EQ(piled["hit_rate_by_turn"][0]["requests"], 1);
  auto spread = summarize({"aware", "u", "w", 1},
                          {record(0, 0, 100, 0, "a", 10), subagent(1, 2, 20), subagent(2, 2, 30), subagent(1, 1, 20)});
  auto markdown = markdown_report({piled, spread});
  EXPECT_NE(markdown.find("## Sub-agents"), std::string::npos) << markdown;
  EXPECT_NE(markdown.find("| aware | 3 | 50.0% | 23.3 | 2 | 50.0% | 25.0 | 0.50x |"), std::string::npos) << markdown;
  EXPECT_TRUE(summarize({"plain", "u", "w", 1}, {record(0, 0, 100, 0, "a", 10)})["subagents"].is_null());
}

TEST(Report, CeilingPrefillAndTheCurvesTheChartsDraw) {
  auto one = record(0, 0, 100, 0, "a", 10);
  auto two = record(0, 1, 200, 90, "a", 30);
  two.ceiling_tokens = 120;
  two.sent_ms = 1000;
  auto three = record(1, 0, 100, 0, "b", 20);
  three.sent_ms = 400;
  auto summary = summarize({"run", "u", "chat", 1}, {one, two, three});
  EXPECT_EQ(summary["ceiling_tokens"], 120);
  EXPECT_DOUBLE_EQ(summary["hit_over_ceiling"].get<double>(), 0.75);
  EXPECT_EQ(summary["prefill_tokens_computed"], 310);
  // The CDF ends at the slowest request and never goes down.
  const auto& cdf = summary["ttft_cdf"];
  ASSERT_EQ(cdf.size(), 41u);
  EXPECT_DOUBLE_EQ(cdf.back()[0].get<double>(), 30);
  EXPECT_DOUBLE_EQ(cdf.back()[1].get<double>(), 1);
  for (std::size_t index = 1; index < cdf.size(); ++index) {
    EXPECT_LE(cdf[index - 1][0].get<double>(), cdf[index][0].get<double>());
  }
  // Each request falls in its worker's bin: a at the start and the end, b in between.
  const auto& workers = summary["worker_timeline"]["workers"];
  ASSERT_EQ(workers.size(), 2u);
  EXPECT_EQ(workers["a"].front(), 1);
  EXPECT_EQ(workers["a"].back(), 1);
  std::uint64_t b_total = 0;
  for (const auto& count : workers["b"]) {
    b_total += count.get<std::uint64_t>();
  }
  EXPECT_EQ(b_total, 1u);
  EXPECT_EQ(workers["b"].front(), 0);
}

TEST(Report, TheHtmlPageHasEveryChartAndNoScripts) {
  auto base = summarize({"sticky", "u", "chat", 1}, {record(0, 0, 100, 20, "a", 10), record(0, 1, 100, 40, "b", 12)});
  auto other = summarize({"aware <b>", "u", "chat", 1}, {record(0, 0, 100, 40, "a", 5), record(0, 1, 100, 80, "a", 5)});
  auto html = html_report({base, other});
  EXPECT_EQ(html.rfind("<!doctype html>", 0), 0u);
  for (const char* chart : {"ttft-cdf", "hit-by-turn", "prefill-computed", "worker-timeline"}) {
    EXPECT_NE(html.find(std::string("data-chart='") + chart + "'"), std::string::npos) << chart;
  }
  EXPECT_NE(html.find("aware &lt;b&gt;"), std::string::npos);
  EXPECT_EQ(html.find("aware <b>"), std::string::npos);
  EXPECT_EQ(html.find("<script"), std::string::npos);
  EXPECT_EQ(html.find("http://"), html.find("http://www.w3.org/2000/svg"));  // nothing fetched
  // Every opened svg is closed.
  std::size_t opened = 0;
  std::size_t closed = 0;
  for (auto at = html.find("<svg"); at != std::string::npos; at = html.find("<svg", at + 1)) {
    ++opened;
  }
  for (auto at = html.find("</svg>"); at != std::string::npos; at = html.find("</svg>", at + 1)) {
    ++closed;
  }
  EXPECT_EQ(opened, 5u);  // CDF, hit by turn, prefill, one timeline per run
  EXPECT_EQ(opened, closed);
}

TEST(Report, CapacityTableRatiosAndChart) {
  using nlohmann::json;
  json round_robin = {{"name", "round_robin"},
                      {"capacity_load", 0.5},
                      {"capacity", {{"sessions_per_minute", 10.0}}},
                      {"steps", json::array({{{"load", 0.5}, {"ttft_p90_ms", 400}, {"held", true}},
                                             {{"load", 1.0}, {"ttft_p90_ms", 900}}})}};
  json aware = {{"name", "cache_aware"},
                {"capacity_load", 0.75},
                {"capacity", {{"sessions_per_minute", 15.0}}},
                {"steps", json::array({{{"load", 0.75}, {"ttft_p90_ms", 450}, {"held", true}}})}};
  // A peer that did not start: named with its reason, no figures.
  json absent = {{"name", "smg_cache_aware"}, {"failure", "did not start: not installed"}, {"steps", json::array()}};
  json capacity = {
      {"workload", "chat"}, {"slo_p90_ttft_ms", 500}, {"targets", json::array({round_robin, aware, absent})}};
  auto markdown = capacity_markdown(capacity);
  // The bracket: round robin held at 50% and missed at 100%; cache_aware never missed.
  EXPECT_NE(markdown.find("| round_robin | 50.0% | 100.0% | 10.00 | 2 | 1.00x |"), std::string::npos) << markdown;
  EXPECT_NE(markdown.find("| cache_aware | 75.0% | - | 15.00 | 1 | 1.50x |"), std::string::npos) << markdown;
  EXPECT_NE(markdown.find("| smg_cache_aware | did not start: not installed | - | - | 0 | - |"), std::string::npos)
      << markdown;
  EXPECT_NE(markdown.find("| round_robin | 100.0% | 900.0 | 0 | 0.0% | - | missed |"), std::string::npos) << markdown;
  auto html = capacity_html(capacity);
  EXPECT_NE(html.find("data-chart='capacity'"), std::string::npos);
  EXPECT_NE(html.find("SLO 500 ms"), std::string::npos);
}

}  // namespace
}  // namespace kvgate::load
