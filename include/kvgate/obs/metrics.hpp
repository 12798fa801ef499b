#pragma once
// kvgate's own Prometheus metrics that are not a worker's (those live with
// the worker: obs/worker_series.hpp), and the exposition of both. Names
// follow Prometheus conventions: prefix kvgate_, unit in the name, counters
// end in _total. Families are created once; label children are looked up
// per event (prometheus-cpp keeps them in a mutex-guarded map), except the
// series counted on every request, whose children each thread looks up
// once (ThreadMetrics below). Label values known in advance (a model's
// reasons, the error codes, a tenant's refusals) are declared at 0 when the
// configuration is installed (declare_model, declare_tenant,
// declare_client_error), so a fresh gateway exposes every family.
#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "kvgate/obs/worker_series.hpp"

namespace kvgate::obs {

// Label children by a string key, looked up with a string_view (no copy of
// the reused key buffer per lookup): the per-thread handle tables below and
// in metrics.cpp.
struct SeriesKeyHash {
  using is_transparent = void;
  std::size_t operator()(std::string_view key) const { return std::hash<std::string_view>{}(key); }
};
template <class Handles>
using SeriesMap = std::unordered_map<std::string, Handles, SeriesKeyHash, std::equal_to<>>;

class Metrics {
 public:
  Metrics();

  // The label children of one model's request series: its requests that
  // reached no worker (worker "none"), by status, made at the first one,
  // and the model's latency histograms.
  struct RequestSeries {
    prometheus::Counter* unrouted = nullptr;
    prometheus::Histogram* duration = nullptr;
    prometheus::Histogram* first_byte = nullptr;
  };
  RequestSeries request_series(std::string_view model);
  prometheus::Counter& unrouted_requests(std::string_view model, int status);

  // Series whose label values are known once the configuration is: each at
  // 0 from the start. Idempotent.
  void declare_model(std::string_view model);
  void declare_tenant(std::string_view tenant);
  void declare_client_error(int status, std::string_view code);

  void retry(std::string_view model);
  // A retry the retry budget refused (the client got the last error).
  void retry_denied(std::string_view model);
  // Admission control (proxy/admission_gate.hpp).
  void admission_refused(std::string_view tenant, std::string_view reason);
  void admission_waited(std::string_view tenant, double seconds);
  void set_admission_state(std::size_t waiting, std::uint32_t admitted);
  void client_error(int status, std::string_view code);
  void connection_rejected();
  void config_reload(bool success);

  // The index writer thread.
  void index_evictions(std::uint64_t entries);

  // Sessions (the router): a turn that left its session's previous worker,
  // by reason; the engine-reported hit ratio of turns 2 and later; the
  // sessions seen within their idle TTL (refreshed when /metrics is read).
  void session_move(std::string_view model, std::string_view reason);
  void session_turn_hit(std::string_view model, double ratio);
  // models[].workers_from: workers a source (dns, file) last returned, and
  // lookups or reads that failed (the last good list is kept).
  void discovered_workers(std::string_view model, std::string_view source, std::size_t workers);
  void discovery_error(std::string_view model, std::string_view source);
  void set_sessions_active(std::size_t sessions);

  // Exact tokenisation of a request: sections served from the segment cache
  // and sections encoded, template loop iterations replayed from the render
  // cache and evaluated; template errors answered with a 400.
  struct PromptCacheCounters {
    prometheus::Counter* segment_hits;
    prometheus::Counter* segment_misses;
    prometheus::Counter* iterations_replayed;
    prometheus::Counter* iterations_evaluated;
  };
  PromptCacheCounters prompt_cache_counters(std::string_view model);
  void template_error(std::string_view model);

  prometheus::Gauge& in_flight_requests() { return *in_flight_requests_; }
  prometheus::Gauge& open_connections() { return *open_connections_; }

  // Prometheus text exposition: these series and those of `workers` (the
  // workers of the routing table in force: a worker that left it is not
  // shown, whoever still holds its series).
  [[nodiscard]] std::string serialize(std::span<const WorkerSeries* const> workers = {}) const;

 private:
  std::shared_ptr<prometheus::Registry> registry_;
  prometheus::Family<prometheus::Counter>& requests_;
  prometheus::Family<prometheus::Histogram>& request_duration_;
  prometheus::Family<prometheus::Histogram>& first_byte_;
  prometheus::Family<prometheus::Counter>& retries_;
  prometheus::Family<prometheus::Counter>& client_errors_;
  prometheus::Family<prometheus::Counter>& config_reloads_;
  prometheus::Family<prometheus::Counter>* retries_denied_ = nullptr;
  prometheus::Family<prometheus::Counter>* admission_rejections_ = nullptr;
  prometheus::Family<prometheus::Histogram>* admission_wait_ = nullptr;
  prometheus::Gauge* admission_queue_ = nullptr;
  prometheus::Gauge* admission_admitted_ = nullptr;
  prometheus::Family<prometheus::Counter>* session_moves_ = nullptr;
  prometheus::Family<prometheus::Histogram>* session_turn_hit_ = nullptr;
  prometheus::Family<prometheus::Gauge>* discovered_workers_ = nullptr;
  prometheus::Family<prometheus::Counter>* discovery_errors_ = nullptr;
  prometheus::Gauge* sessions_active_ = nullptr;
  prometheus::Family<prometheus::Counter>* prompt_segments_ = nullptr;
  prometheus::Family<prometheus::Counter>* template_iterations_ = nullptr;
  prometheus::Family<prometheus::Counter>* template_errors_ = nullptr;
  prometheus::Counter* index_evictions_;
  prometheus::Counter* connections_rejected_;
  prometheus::Gauge* in_flight_requests_;
  prometheus::Gauge* open_connections_;
};

// One I/O thread's handles to request series, so the request path skips
// prometheus-cpp's label-map construction and family mutex after the first
// request of each series. Not thread-safe: one per thread. Bounded because
// every label comes from the config or a fixed set (unknown models count as
// "none", never as the client's string).
class ThreadMetrics {
 public:
  explicit ThreadMetrics(Metrics& metrics) : metrics_(metrics) {}

  // `worker`: the worker that answered (null: the request reached none).
  // `first_token_seconds`: a stream's first data event (< 0: not a stream,
  // or none).
  void request_finished(std::string_view model, WorkerSeries* worker, int status, double duration_seconds,
                        double first_byte_seconds, double first_token_seconds);
  // What the caches of exact tokenisation did for one prompt.
  struct PromptCacheCounts {
    std::uint64_t segment_hits = 0;  // sections served from / added to the segment cache
    std::uint64_t segment_misses = 0;
    std::uint64_t iterations_replayed = 0;  // template loop iterations replayed from / evaluated past the render cache
    std::uint64_t iterations_evaluated = 0;
  };
  void prompt_caches(std::string_view model, const PromptCacheCounts& counts);

 private:
  Metrics& metrics_;
  std::string key_;  // reused lookup buffer
  SeriesMap<Metrics::RequestSeries> series_;
  SeriesMap<Metrics::PromptCacheCounters> prompt_caches_;
};

}  // namespace kvgate::obs
