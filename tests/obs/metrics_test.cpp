#include "kvgate/obs/metrics.hpp"

#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <thread>

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

TEST(Metrics, PerRequestCountersAddUpAcrossThreads) {
  Metrics metrics;
  std::thread other([&] {
    for (int turn = 0; turn < 100; ++turn) {
      metrics.prompt_tokens("m", "w0", 10, 4);
      metrics.cache_prediction("w0", "exact");
    }
  });
  for (int turn = 0; turn < 100; ++turn) {
    metrics.prompt_tokens("m", "w0", 1, 9);  // more cached than prompted counts as all cached
    metrics.prompt_tokens("m", "w1", 2, 0);
    metrics.cache_prediction("w0", "exact");
  }
  other.join();
  const auto text = metrics.serialize();
  EXPECT_EQ(series_value(text, R"(kvgate_prompt_tokens_total{model="m",worker="w0"})"), 1100);
  EXPECT_EQ(series_value(text, R"(kvgate_cached_prompt_tokens_total{model="m",worker="w0"})"), 500);
  EXPECT_EQ(series_value(text, R"(kvgate_prompt_tokens_total{model="m",worker="w1"})"), 200);
  EXPECT_EQ(series_value(text, R"(kvgate_cache_predictions_total{outcome="exact",worker="w0"})"), 200);
}

TEST(Metrics, ANewMetricsInTheSameStorageStartsFromZero) {
  // The same address twice: a thread's handles to the first one's series
  // must not be taken for the second's (they would count into freed memory).
  std::optional<Metrics> metrics;
  metrics.emplace();
  metrics->prompt_tokens("m", "w0", 7, 0);
  metrics->cache_prediction("w0", "over");
  metrics.emplace();
  metrics->prompt_tokens("m", "w0", 3, 1);
  metrics->cache_prediction("w0", "over");
  const auto text = metrics->serialize();
  EXPECT_EQ(series_value(text, R"(kvgate_prompt_tokens_total{model="m",worker="w0"})"), 3);
  EXPECT_EQ(series_value(text, R"(kvgate_cached_prompt_tokens_total{model="m",worker="w0"})"), 1);
  EXPECT_EQ(series_value(text, R"(kvgate_cache_predictions_total{outcome="over",worker="w0"})"), 1);
}

}  // namespace
}  // namespace kvgate::obs
