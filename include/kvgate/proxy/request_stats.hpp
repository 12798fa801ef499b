#pragma once
// The data plane's own series, declared here beside the code that counts
// them: requests by model and status (the routed ones are counted on the
// worker's series, obs/worker_series.hpp), latency, retries, the errors
// kvgate answers itself, connections, and what exact tokenisation's caches
// did. Shared by every I/O thread: prometheus-cpp's counters are atomics,
// and a family's label map locks, so the series counted on every request
// are looked up once per thread (ThreadStats).
#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

#include "kvgate/obs/exposition.hpp"
#include "kvgate/obs/worker_series.hpp"
#include "kvgate/policy/reason.hpp"

namespace kvgate::proxy {

class RequestStats {
 public:
  explicit RequestStats(prometheus::Registry& registry);

  // Series whose label values are known once the configuration is: each at
  // 0 from the start. Idempotent.
  void declare_model(std::string_view model, bool disaggregated);
  void declare_client_error(int status, std::string_view code);

  // The label children of one model's request series made on first use.
  struct ModelSeries {
    prometheus::Counter* unrouted = nullptr;  // by status; made at the first request that reached no worker
    prometheus::Histogram* duration = nullptr;
    prometheus::Histogram* first_byte = nullptr;
  };
  ModelSeries model_series(std::string_view model);
  prometheus::Counter& unrouted_requests(std::string_view model, int status);

  // Exact tokenisation of a request: sections served from the segment cache
  // and sections encoded, template loop iterations replayed from the render
  // cache and evaluated.
  struct PromptCacheCounters {
    prometheus::Counter* segment_hits;
    prometheus::Counter* segment_misses;
    prometheus::Counter* iterations_replayed;
    prometheus::Counter* iterations_evaluated;
  };
  PromptCacheCounters prompt_cache_counters(std::string_view model);

  void retry(std::string_view model) { retries_.Add({{"model", std::string(model)}}).Increment(); }
  // A retry the retry budget refused (the client got the last error).
  void retry_denied(std::string_view model) { retries_denied_.Add({{"model", std::string(model)}}).Increment(); }
  // A disaggregated model's prefill placements, one counter per reason
  // (local_prefill, remote_prefill, prefill_unavailable, in that order).
  struct PlacementCounters {
    std::array<prometheus::Counter*, 3> by_reason{};
  };
  PlacementCounters placement_counters(std::string_view model);
  void prefill_failed(std::string_view model) { prefill_failures_.Add({{"model", std::string(model)}}).Increment(); }
  void client_error(int status, std::string_view code);
  // A template that raised (answered with a 400).
  void template_error(std::string_view model) { template_errors_.Add({{"model", std::string(model)}}).Increment(); }
  void connection_rejected() { connections_rejected_.Increment(); }

  prometheus::Gauge& in_flight_requests() { return in_flight_requests_; }
  prometheus::Gauge& open_connections() { return open_connections_; }

 private:
  prometheus::Family<prometheus::Counter>& requests_;
  prometheus::Family<prometheus::Histogram>& request_duration_;
  prometheus::Family<prometheus::Histogram>& first_byte_;
  prometheus::Family<prometheus::Counter>& retries_;
  prometheus::Family<prometheus::Counter>& retries_denied_;
  prometheus::Family<prometheus::Counter>& prefill_placements_;
  prometheus::Family<prometheus::Counter>& prefill_failures_;
  prometheus::Family<prometheus::Counter>& client_errors_;
  prometheus::Family<prometheus::Counter>& template_errors_;
  prometheus::Family<prometheus::Counter>& prompt_segments_;
  prometheus::Family<prometheus::Counter>& template_iterations_;
  prometheus::Counter& connections_rejected_;
  prometheus::Gauge& in_flight_requests_;
  prometheus::Gauge& open_connections_;
};

// One I/O thread's handles to the per-request series, so the request path
// skips prometheus-cpp's label-map construction and family lock after the
// first request of each series. Not thread-safe: one per thread. Bounded
// because every label comes from the config or a fixed set (an unknown
// model counts as "none", never as the client's string).
class ThreadStats {
 public:
  explicit ThreadStats(RequestStats& shared) : shared_(shared) {}

  RequestStats& shared() { return shared_; }

  // `worker`: the worker that answered (null: the request reached none).
  // `first_token_seconds`: a stream's first data event (< 0: not a stream,
  // or none).
  void request_finished(std::string_view model, obs::WorkerSeries* worker, int status, double duration_seconds,
                        double first_byte_seconds, double first_token_seconds);
  // What the caches of exact tokenisation did for one prompt.
  struct PromptCacheCounts {
    std::uint64_t segment_hits = 0;  // sections served from / added to the segment cache
    std::uint64_t segment_misses = 0;
    std::uint64_t iterations_replayed = 0;  // template loop iterations replayed from / evaluated past the render cache
    std::uint64_t iterations_evaluated = 0;
  };
  void prompt_caches(std::string_view model, const PromptCacheCounts& counts);
  // Where a disaggregated request's prefill ran (policy/disaggregation.hpp).
  void prefill_placement(std::string_view model, policy::Reason placement);

 private:
  RequestStats& shared_;
  std::string key_;  // reused lookup buffer
  obs::SeriesMap<RequestStats::ModelSeries> series_;
  obs::SeriesMap<RequestStats::PromptCacheCounters> prompt_caches_;
  obs::SeriesMap<RequestStats::PlacementCounters> placements_;
};

}  // namespace kvgate::proxy
