#include "kvgate/obs/exposition.hpp"

#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <thread>

#include "kvgate/obs/worker_series.hpp"

namespace kvgate::obs {
namespace {

// The value of one series line of the exposition ("name{labels} value").
double series_value(const std::string& exposition, const std::string& series) {
  const auto at = exposition.find(series + " ");
  if (at == std::string::npos) {
    return -1;
  }
  return std::stod(exposition.substr(at + series.size() + 1));
}

std::size_t occurrences(const std::string& text, const std::string& part) {
  std::size_t count = 0;
  for (auto at = text.find(part); at != std::string::npos; at = text.find(part, at + 1)) {
    ++count;
  }
  return count;
}

TEST(WorkerSeries, PerRequestCountersAddUpAcrossThreads) {
  Exposition metrics;
  WorkerSeries w0("m", "w0");
  WorkerSeries w1("m", "w1");
  std::thread other([&] {
    for (int turn = 0; turn < 100; ++turn) {
      w0.prompt_tokens(10, 4);
      w0.cache_prediction(PredictionOutcome::exact);
      w0.request_finished(502, -1);
    }
  });
  for (int turn = 0; turn < 100; ++turn) {
    w0.prompt_tokens(1, 9);  // more cached than prompted counts as all cached
    w1.prompt_tokens(2, 0);
    w0.cache_prediction(PredictionOutcome::exact);
    w0.request_finished(502, 0.01);
  }
  other.join();
  const WorkerSeries* both[] = {&w0, &w1};
  const auto text = metrics.serialize(both);
  EXPECT_EQ(series_value(text, R"(kvgate_prompt_tokens_total{model="m",worker="w0"})"), 1100);
  EXPECT_EQ(series_value(text, R"(kvgate_cached_prompt_tokens_total{model="m",worker="w0"})"), 500);
  EXPECT_EQ(series_value(text, R"(kvgate_prompt_tokens_total{model="m",worker="w1"})"), 200);
  EXPECT_EQ(series_value(text, R"(kvgate_cache_predictions_total{outcome="exact",worker="w0"})"), 200);
  EXPECT_EQ(series_value(text, R"(kvgate_requests_total{model="m",status="502",worker="w0"})"), 200);
  EXPECT_EQ(series_value(text, R"(kvgate_time_to_first_token_seconds_count{model="m",worker="w0"})"), 100);
}

// The gateway's series and each worker's are one family per name in the
// exposition; a worker left out (no longer configured) is not shown.
TEST(WorkerSeries, TheExpositionMergesFamiliesAndShowsOnlyTheWorkersGiven) {
  Exposition metrics;
  // As the request path declares the unrouted requests (proxy/request_stats.hpp).
  prometheus::BuildCounter()
      .Name("kvgate_requests_total")
      .Help("requests")
      .Register(metrics.registry())
      .Add({{"model", "m"}, {"worker", "none"}, {"status", "503"}})
      .Increment();
  WorkerSeries kept("m", "kept");
  WorkerSeries gone("m", "gone");
  kept.request_finished(200, 0.02);
  gone.request_finished(200, 0.02);
  const WorkerSeries* in_force[] = {&kept};
  const auto text = metrics.serialize(in_force);
  EXPECT_EQ(occurrences(text, "# TYPE kvgate_requests_total counter"), 1u);
  EXPECT_EQ(occurrences(text, "# TYPE kvgate_upstream_errors_total counter"), 1u);
  EXPECT_EQ(series_value(text, R"(kvgate_requests_total{model="m",status="200",worker="kept"})"), 1);
  EXPECT_EQ(series_value(text, R"(kvgate_requests_total{model="m",status="503",worker="none"})"), 1);
  EXPECT_EQ(text.find("worker=\"gone\""), std::string::npos);
  EXPECT_EQ(series_value(text, "kvgate_build_info{version=\"" KVGATE_VERSION "\"}"), 1);
}

// A worker's label values known in advance exist at 0 before anything
// happened.
TEST(WorkerSeries, KnownLabelValuesStartAtZero) {
  Exposition metrics;
  WorkerSeries worker("m", "w");
  const WorkerSeries* workers[] = {&worker};
  const auto text = metrics.serialize(workers);
  for (const char* series : {
           R"(kvgate_cache_predictions_total{outcome="over",worker="w"})",
           R"(kvgate_upstream_errors_total{kind="stream_interrupted",worker="w"})",
           R"(kvgate_kv_events_total{type="BlockRemoved",worker="w"})",
           R"(kvgate_kv_event_gaps_total{worker="w"})",
           R"(kvgate_kv_event_replays_total{outcome="failed",worker="w"})",
           R"(kvgate_worker_ejections_total{cause="status_5xx",worker="w"})",
           R"(kvgate_worker_scrapes_total{result="skipped",worker="w"})",
           R"(kvgate_requests_total{model="m",status="200",worker="w"})",
       }) {
    EXPECT_EQ(series_value(text, series), 0) << series;
  }
  EXPECT_EQ(series_value(text, R"(kvgate_worker_up{worker="w"})"), 1);
}

// A worker without an event stream has no stream gauges; one whose stream
// is configured has them, and loses them when it no longer is.
TEST(WorkerSeries, EventStreamGaugesExistOnlyForAConfiguredStream) {
  Exposition metrics;
  WorkerSeries worker("m", "w");
  const WorkerSeries* workers[] = {&worker};
  worker.set_event_stream_state({true, true, false, false, 12});
  auto text = metrics.serialize(workers);
  EXPECT_EQ(series_value(text, R"(kvgate_kv_events_connected{worker="w"})"), 1);
  EXPECT_EQ(series_value(text, R"(kvgate_index_blocks{worker="w"})"), 12);
  worker.set_event_stream_state({false, false, false, false, 0});
  text = metrics.serialize(workers);
  EXPECT_EQ(text.find("kvgate_kv_events_connected{"), std::string::npos);
  EXPECT_EQ(series_value(text, R"(kvgate_index_blocks{worker="w"})"), 0);
}

}  // namespace
}  // namespace kvgate::obs
