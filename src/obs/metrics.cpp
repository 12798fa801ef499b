#include "kvgate/obs/metrics.hpp"

#include <algorithm>
#include <atomic>

#include <prometheus/text_serializer.h>

namespace kvgate::obs {
namespace {

using prometheus::BuildCounter;
using prometheus::BuildGauge;
using prometheus::BuildHistogram;

// Seconds; spans a cached short prompt (ms) to a long generation (minutes).
const prometheus::Histogram::BucketBoundaries& latency_buckets() {
  static const prometheus::Histogram::BucketBoundaries kBuckets{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
                                                                1,     2.5,    5,     10,   30,    60,   120, 300};
  return kBuckets;
}

std::string status_label(int status) {
  return status == 0 ? "none" : std::to_string(status);
}

std::atomic<std::uint64_t> next_serial{1};

// One thread's handles to the label children of counters counted on every
// request and never removed (a prometheus-cpp child lives as long as its
// family), so the request path skips building a label map and taking the
// family's mutex after the first event of each series. Keyed by the owning
// Metrics' serial (a Metrics made later at the same address never sees
// another's handles), the family and the label values. Bounded like the
// families themselves: labels come from the config and fixed sets.
struct CounterHandles {
  std::string key;  // reused lookup buffer
  SeriesMap<prometheus::Counter*> children;
};

prometheus::Counter& counter_child(std::uint64_t serial, prometheus::Family<prometheus::Counter>& family,
                                   std::string_view first_name, std::string_view first_value,
                                   std::string_view second_name, std::string_view second_value) {
  thread_local CounterHandles handles;
  auto& key = handles.key;
  const auto* family_address = &family;
  key.assign(reinterpret_cast<const char*>(&serial), sizeof serial);
  key.append(reinterpret_cast<const char*>(&family_address), sizeof family_address);
  key.append(first_value).push_back('\n');
  key.append(second_value);
  auto found = handles.children.find(std::string_view(key));
  if (found == handles.children.end()) {
    auto& child = family.Add(
        {{std::string(first_name), std::string(first_value)}, {std::string(second_name), std::string(second_value)}});
    found = handles.children.emplace(key, &child).first;
  }
  return *found->second;
}

}  // namespace

Metrics::Metrics()
    : serial_(next_serial.fetch_add(1, std::memory_order_relaxed)),
      registry_(std::make_shared<prometheus::Registry>()),
      requests_(BuildCounter()
                    .Name("kvgate_requests_total")
                    .Help("Requests answered, by model, worker (none when not routed) and HTTP status")
                    .Register(*registry_)),
      request_duration_(BuildHistogram()
                            .Name("kvgate_request_duration_seconds")
                            .Help("Time from the request's last byte read to the response's last byte written")
                            .Register(*registry_)),
      first_byte_(BuildHistogram()
                      .Name("kvgate_time_to_first_byte_seconds")
                      .Help("Time from the request read to the first response byte from the worker")
                      .Register(*registry_)),
      upstream_errors_(BuildCounter()
                           .Name("kvgate_upstream_errors_total")
                           .Help("Failures talking to a worker, by kind (connect, timeout, reset, status_5xx, "
                                 "stream_interrupted)")
                           .Register(*registry_)),
      retries_(BuildCounter()
                   .Name("kvgate_retries_total")
                   .Help("Requests sent again to another worker after a failure before any response byte")
                   .Register(*registry_)),
      client_errors_(BuildCounter()
                         .Name("kvgate_client_errors_total")
                         .Help("Requests rejected by kvgate itself, by status and error code")
                         .Register(*registry_)),
      health_checks_(BuildCounter()
                         .Name("kvgate_health_checks_total")
                         .Help("Active health checks, by worker and result")
                         .Register(*registry_)),
      metrics_scrapes_(
          BuildCounter()
              .Name("kvgate_worker_scrapes_total")
              .Help("Scrapes of the workers' /metrics, by worker and result (success, failure, skipped: the last one "
                    "had not answered yet)")
              .Register(*registry_)),
      config_reloads_(BuildCounter()
                          .Name("kvgate_config_reloads_total")
                          .Help("Configuration reloads (SIGHUP), by result")
                          .Register(*registry_)),
      worker_up_(BuildGauge()
                     .Name("kvgate_worker_up")
                     .Help("1 when the worker is healthy and eligible for routing")
                     .Register(*registry_)),
      worker_in_flight_(BuildGauge()
                            .Name("kvgate_worker_in_flight_requests")
                            .Help("Requests dispatched to the worker and not yet finished")
                            .Register(*registry_)),
      worker_pending_prefill_(BuildGauge()
                                  .Name("kvgate_worker_pending_prefill_tokens")
                                  .Help("Uncached prompt tokens dispatched to the worker whose answer has not started")
                                  .Register(*registry_)),
      worker_recent_ttft_(BuildGauge()
                              .Name("kvgate_worker_recent_ttft_seconds")
                              .Help("Recent time to first token of the worker's streamed answers, measured by the "
                                    "gateway (exponentially weighted, about the last ten)")
                              .Register(*registry_)),
      kv_events_(BuildCounter()
                     .Name("kvgate_kv_events_total")
                     .Help("KV-cache events received from the worker's engine, by event type (unknown and "
                           "malformed events are counted and skipped)")
                     .Register(*registry_)),
      kv_event_gaps_(BuildCounter()
                         .Name("kvgate_kv_event_gaps_total")
                         .Help("Sequence gaps seen in the worker's KV-event stream")
                         .Register(*registry_)),
      kv_event_replays_(BuildCounter()
                            .Name("kvgate_kv_event_replays_total")
                            .Help("Replay requests sent after a gap, by outcome (closed, failed)")
                            .Register(*registry_)),
      kv_event_resets_(BuildCounter()
                           .Name("kvgate_kv_event_resets_total")
                           .Help("Engine restarts detected from the KV-event sequence; the worker's entries "
                                 "were dropped")
                           .Register(*registry_)),
      kv_event_decode_errors_(BuildCounter()
                                  .Name("kvgate_kv_event_decode_errors_total")
                                  .Help("KV-event messages that could not be decoded (skipped)")
                                  .Register(*registry_)),
      index_unindexable_(BuildCounter()
                             .Name("kvgate_index_unindexable_blocks_total")
                             .Help("Stored blocks no request can match (unknown parent, other block size, "
                                   "multimodal inputs): tracked for removal, not indexed")
                             .Register(*registry_)),
      kv_events_connected_(BuildGauge()
                               .Name("kvgate_kv_events_connected")
                               .Help("1 while the worker's KV-event publisher is connected")
                               .Register(*registry_)),
      kv_events_stale_(BuildGauge()
                           .Name("kvgate_kv_events_stale")
                           .Help("1 while the worker's events are known incomplete (unclosed gap); it is "
                                 "routed in approximate mode meanwhile")
                           .Register(*registry_)),
      kv_events_silent_(BuildGauge()
                            .Name("kvgate_kv_events_silent")
                            .Help("1 when the worker got traffic but its configured event stream sent nothing")
                            .Register(*registry_)),
      index_blocks_(BuildGauge()
                        .Name("kvgate_index_blocks")
                        .Help("Blocks the prefix index credits to the worker")
                        .Register(*registry_)),
      cache_predictions_(BuildCounter()
                             .Name("kvgate_cache_predictions_total")
                             .Help("Routed requests whose engine reported cached tokens, by whether kvgate's "
                                   "prediction was exact, over or under the engine's figure")
                             .Register(*registry_)) {
  prompt_segments_ = &BuildCounter()
                          .Name("kvgate_tokenizer_segments_total")
                          .Help(
                              "Prompt sections (text between special tokens) of exactly tokenised requests, by "
                              "whether the segment cache had their ids (hit) or they were encoded (miss)")
                          .Register(*registry_);
  template_iterations_ = &BuildCounter()
                              .Name("kvgate_template_iterations_total")
                              .Help(
                                  "Chat-template loop iterations (mostly one per message) of exactly tokenised "
                                  "requests, by whether the render cache replayed them or they were evaluated")
                              .Register(*registry_);
  // Engines send a stream's header at admission (llama.cpp; vLLM too when
  // the request queues), so the first byte says nothing of the prefill: the
  // first data event does.
  first_token_ = &BuildHistogram()
                      .Name("kvgate_time_to_first_token_seconds")
                      .Help(
                          "Time from the request read to a stream's first data event (the first token), by model "
                          "and worker")
                      .Register(*registry_);
  index_drifting_ = &BuildGauge()
                         .Name("kvgate_index_drifting")
                         .Help(
                             "1 while the worker's cache predictions persistently exceed what its engine "
                             "reports; its index is not credited meanwhile")
                         .Register(*registry_);
  prefill_ms_per_token_ = &BuildGauge()
                               .Name("kvgate_worker_prefill_seconds_per_token")
                               .Help("Learned prefill cost per uncached prompt token (also prices the queue)")
                               .Register(*registry_);
  prefill_ms_per_token_pair_ = &BuildGauge()
                                    .Name("kvgate_worker_prefill_seconds_per_token_pair")
                                    .Help("Learned causal-attention cost per (query, context) token pair of a prefill")
                                    .Register(*registry_);
  prefill_base_ms_ = &BuildGauge()
                          .Name("kvgate_worker_prefill_base_seconds")
                          .Help("Learned fixed part of a prefill (a scheduler step, the network hop)")
                          .Register(*registry_);
  prefill_samples_ = &BuildGauge()
                          .Name("kvgate_worker_prefill_fit_samples")
                          .Help(
                              "Completed streamed requests the worker's prefill cost was learned from "
                              "(0: the configured priors)")
                          .Register(*registry_);
  admission_rejections_ = &BuildCounter()
                               .Name("kvgate_admission_rejections_total")
                               .Help(
                                   "Requests admission refused with 429 (or that left while queued), by tenant and "
                                   "reason (requests_per_minute, prompt_tokens_per_minute, queue_full, "
                                   "queue_timeout, abandoned)")
                               .Register(*registry_);
  admission_wait_ = &BuildHistogram()
                         .Name("kvgate_admission_wait_seconds")
                         .Help("Time an admitted request waited for a slot, by tenant (0 when it got one at once)")
                         .Register(*registry_);
  admission_queue_ = &BuildGauge()
                          .Name("kvgate_admission_queue_length")
                          .Help("Requests waiting for an admission slot")
                          .Register(*registry_)
                          .Add({});
  admission_admitted_ = &BuildGauge()
                             .Name("kvgate_admission_admitted")
                             .Help(
                                 "Inference requests holding an admission slot (only when admission limits "
                                 "concurrency)")
                             .Register(*registry_)
                             .Add({});
  retries_denied_ = &BuildCounter()
                         .Name("kvgate_retries_denied_total")
                         .Help("Retries the retry budget refused (the client got the attempt's error)")
                         .Register(*registry_);
  worker_ejections_ = &BuildCounter()
                           .Name("kvgate_worker_ejections_total")
                           .Help(
                               "Times a worker was taken out of routing after consecutive traffic failures, by "
                               "the last failure's cause (connect, status_5xx, reset, timeout)")
                           .Register(*registry_);
  worker_ejected_ = &BuildGauge()
                         .Name("kvgate_worker_ejected")
                         .Help("1 while the worker is out of routing after consecutive traffic failures")
                         .Register(*registry_);
  session_moves_ = &BuildCounter()
                        .Name("kvgate_session_moves_total")
                        .Help(
                            "Session turns routed away from the session's previous worker, by reason "
                            "(moved_queue, moved_evicted, moved_unhealthy, moved_better_prefix)")
                        .Register(*registry_);
  session_turn_hit_ = &BuildHistogram()
                           .Name("kvgate_session_turn_hit_ratio")
                           .Help(
                               "Engine-reported cached prompt tokens / prompt tokens, per session turn "
                               "from the second on")
                           .Register(*registry_);
  prompt_tokens_ = &BuildCounter()
                        .Name("kvgate_prompt_tokens_total")
                        .Help("Prompt tokens of routed requests answered 200 with usage, as the engine counted them")
                        .Register(*registry_);
  cached_prompt_tokens_ = &BuildCounter()
                               .Name("kvgate_cached_prompt_tokens_total")
                               .Help(
                                   "Of kvgate_prompt_tokens_total, those the engine reported served from its "
                                   "prefix cache (prompt_tokens_details.cached_tokens)")
                               .Register(*registry_);
  discovered_workers_ = &BuildGauge()
                             .Name("kvgate_discovered_workers")
                             .Help("Workers a model's workers_from source (dns, file) last returned")
                             .Register(*registry_);
  discovery_errors_ = &BuildCounter()
                           .Name("kvgate_discovery_errors_total")
                           .Help(
                               "Failed DNS lookups and unreadable or invalid workers files (the last good list "
                               "is kept)")
                           .Register(*registry_);
  sessions_active_ = &BuildGauge()
                          .Name("kvgate_sessions_active")
                          .Help("Sessions seen within sessions.idle_ttl")
                          .Register(*registry_)
                          .Add({});
  template_errors_ = &BuildCounter()
                          .Name("kvgate_chat_template_errors_total")
                          .Help("Chat requests whose model's chat template failed to render (answered 400)")
                          .Register(*registry_);
  index_evictions_ = &BuildCounter()
                          .Name("kvgate_index_evictions_total")
                          .Help(
                              "(block, worker) entries dropped from the prefix index to stay under "
                              "index.max_entries")
                          .Register(*registry_)
                          .Add({});
  connections_rejected_ = &BuildCounter()
                               .Name("kvgate_connections_rejected_total")
                               .Help("Client connections closed at accept because max_connections was reached")
                               .Register(*registry_)
                               .Add({});
  in_flight_requests_ = &BuildGauge()
                             .Name("kvgate_in_flight_requests")
                             .Help("Requests being served right now")
                             .Register(*registry_)
                             .Add({});
  open_connections_ =
      &BuildGauge().Name("kvgate_client_connections").Help("Open client connections").Register(*registry_).Add({});
  BuildGauge()
      .Name("kvgate_build_info")
      .Help("Always 1; the labels say which kvgate is running")
      .Register(*registry_)
      .Add({{"version", KVGATE_VERSION}})
      .Set(1);
}

Metrics::RequestSeries Metrics::request_series(std::string_view model, std::string_view worker, int status) {
  std::string model_label(model.empty() ? "none" : model);
  RequestSeries series;
  series.count = &requests_.Add({{"model", model_label},
                                 {"worker", std::string(worker.empty() ? "none" : worker)},
                                 {"status", status_label(status)}});
  series.duration = &request_duration_.Add({{"model", model_label}}, latency_buckets());
  series.first_byte = &first_byte_.Add({{"model", model_label}}, latency_buckets());
  series.first_token = &first_token_->Add(
      {{"model", model_label}, {"worker", std::string(worker.empty() ? "none" : worker)}}, latency_buckets());
  return series;
}

void ThreadMetrics::request_finished(std::string_view model, std::string_view worker, int status,
                                     double duration_seconds, double first_byte_seconds, double first_token_seconds) {
  key_.clear();
  key_.append(model).push_back('\n');
  key_.append(worker).push_back('\n');
  key_.append(std::to_string(status));
  auto found = series_.find(std::string_view(key_));
  if (found == series_.end()) {
    found = series_.emplace(key_, metrics_.request_series(model, worker, status)).first;
  }
  found->second.count->Increment();
  found->second.duration->Observe(duration_seconds);
  if (first_byte_seconds >= 0) {
    found->second.first_byte->Observe(first_byte_seconds);
  }
  if (first_token_seconds >= 0) {
    found->second.first_token->Observe(first_token_seconds);
  }
}

void ThreadMetrics::prompt_caches(std::string_view model, const PromptCacheCounts& counts) {
  auto found = prompt_caches_.find(model);
  if (found == prompt_caches_.end()) {
    found = prompt_caches_.emplace(std::string(model), metrics_.prompt_cache_counters(model)).first;
  }
  const auto& counters = found->second;
  auto add = [](prometheus::Counter* counter, std::uint64_t count) {
    if (count != 0) {
      counter->Increment(static_cast<double>(count));
    }
  };
  add(counters.segment_hits, counts.segment_hits);
  add(counters.segment_misses, counts.segment_misses);
  add(counters.iterations_replayed, counts.iterations_replayed);
  add(counters.iterations_evaluated, counts.iterations_evaluated);
}

void Metrics::upstream_error(std::string_view worker, std::string_view kind) {
  upstream_errors_.Add({{"worker", std::string(worker)}, {"kind", std::string(kind)}}).Increment();
}

void Metrics::retry(std::string_view model) {
  retries_.Add({{"model", std::string(model)}}).Increment();
}

void Metrics::admission_refused(std::string_view tenant, std::string_view reason) {
  admission_rejections_->Add({{"tenant", std::string(tenant)}, {"reason", std::string(reason)}}).Increment();
}

void Metrics::admission_waited(std::string_view tenant, double seconds) {
  static const prometheus::Histogram::BucketBoundaries kBuckets{0.001, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30};
  admission_wait_->Add({{"tenant", std::string(tenant)}}, kBuckets).Observe(seconds);
}

void Metrics::set_admission_state(std::size_t waiting, std::uint32_t admitted) {
  admission_queue_->Set(static_cast<double>(waiting));
  admission_admitted_->Set(admitted);
}

void Metrics::retry_denied(std::string_view model) {
  retries_denied_->Add({{"model", std::string(model)}}).Increment();
}

void Metrics::worker_ejected(std::string_view worker, std::string_view cause) {
  worker_ejections_->Add({{"worker", std::string(worker)}, {"cause", std::string(cause)}}).Increment();
}

void Metrics::client_error(int status, std::string_view code) {
  client_errors_.Add({{"status", status_label(status)}, {"code", std::string(code)}}).Increment();
}

void Metrics::connection_rejected() {
  connections_rejected_->Increment();
}

void Metrics::health_check(std::string_view worker, bool success) {
  health_checks_.Add({{"worker", std::string(worker)}, {"result", success ? "success" : "failure"}}).Increment();
}

void Metrics::metrics_scrape(std::string_view worker, ScrapeResult result) {
  metrics_scrapes_.Add({{"worker", std::string(worker)}, {"result", std::string(to_string(result))}}).Increment();
}

void Metrics::config_reload(bool success) {
  config_reloads_.Add({{"result", success ? "success" : "failure"}}).Increment();
}

void Metrics::set_worker_state(std::string_view worker, const WorkerGauges& state) {
  prometheus::Labels labels{{"worker", std::string(worker)}};
  worker_up_.Add(labels).Set(state.up ? 1 : 0);
  worker_in_flight_.Add(labels).Set(state.in_flight);
  worker_pending_prefill_.Add(labels).Set(static_cast<double>(state.pending_prefill_tokens));
  if (state.recent_ttft_seconds) {
    worker_recent_ttft_.Add(labels).Set(*state.recent_ttft_seconds);
  }
  prefill_ms_per_token_->Add(labels).Set(state.prefill_ms_per_token / 1000);
  prefill_ms_per_token_pair_->Add(labels).Set(state.prefill_ms_per_token_pair / 1000);
  prefill_base_ms_->Add(labels).Set(state.prefill_base_ms / 1000);
  prefill_samples_->Add(labels).Set(static_cast<double>(state.prefill_samples));
  worker_ejected_->Add(labels).Set(state.ejected ? 1 : 0);
}

prometheus::Counter& Metrics::kv_events(std::string_view worker, std::string_view type) {
  return kv_events_.Add({{"worker", std::string(worker)}, {"type", std::string(type)}});
}

void Metrics::kv_event_gap(std::string_view worker) {
  kv_event_gaps_.Add({{"worker", std::string(worker)}}).Increment();
}

void Metrics::kv_event_replay(std::string_view worker, bool closed) {
  kv_event_replays_.Add({{"worker", std::string(worker)}, {"outcome", closed ? "closed" : "failed"}}).Increment();
}

void Metrics::kv_event_reset(std::string_view worker) {
  kv_event_resets_.Add({{"worker", std::string(worker)}}).Increment();
}

void Metrics::kv_event_decode_error(std::string_view worker) {
  kv_event_decode_errors_.Add({{"worker", std::string(worker)}}).Increment();
}

void Metrics::index_evictions(std::uint64_t entries) {
  index_evictions_->Increment(static_cast<double>(entries));
}

void Metrics::index_unindexable(std::string_view worker, std::uint64_t blocks) {
  index_unindexable_.Add({{"worker", std::string(worker)}}).Increment(static_cast<double>(blocks));
}

void Metrics::set_event_stream_state(std::string_view worker, const EventStreamGauges& state) {
  prometheus::Labels labels{{"worker", std::string(worker)}};
  index_blocks_.Add(labels).Set(static_cast<double>(state.index_blocks));
  if (state.configured) {
    kv_events_connected_.Add(labels).Set(state.connected ? 1 : 0);
    kv_events_silent_.Add(labels).Set(state.silent ? 1 : 0);
    kv_events_stale_.Add(labels).Set(state.stale ? 1 : 0);
  }
}

void Metrics::cache_prediction(std::string_view worker, std::string_view outcome) {
  counter_child(serial_, cache_predictions_, "worker", worker, "outcome", outcome).Increment();
}

void Metrics::set_index_drifting(std::string_view worker, bool drifting) {
  index_drifting_->Add({{"worker", std::string(worker)}}).Set(drifting ? 1 : 0);
}

void Metrics::session_move(std::string_view model, std::string_view reason) {
  session_moves_->Add({{"model", std::string(model)}, {"reason", std::string(reason)}}).Increment();
}

void Metrics::session_turn_hit(std::string_view model, double ratio) {
  static const prometheus::Histogram::BucketBoundaries kRatioBuckets{0.1, 0.2, 0.3, 0.4,  0.5, 0.6,
                                                                     0.7, 0.8, 0.9, 0.95, 0.99};
  session_turn_hit_->Add({{"model", std::string(model)}}, kRatioBuckets).Observe(ratio);
}

void Metrics::prompt_tokens(std::string_view model, std::string_view worker, std::uint32_t prompt,
                            std::uint32_t cached) {
  counter_child(serial_, *prompt_tokens_, "model", model, "worker", worker).Increment(prompt);
  counter_child(serial_, *cached_prompt_tokens_, "model", model, "worker", worker).Increment(std::min(cached, prompt));
}

void Metrics::discovered_workers(std::string_view model, std::string_view source, std::size_t workers) {
  discovered_workers_->Add({{"model", std::string(model)}, {"source", std::string(source)}})
      .Set(static_cast<double>(workers));
}

void Metrics::discovery_error(std::string_view model, std::string_view source) {
  discovery_errors_->Add({{"model", std::string(model)}, {"source", std::string(source)}}).Increment();
}

void Metrics::set_sessions_active(std::size_t sessions) {
  sessions_active_->Set(static_cast<double>(sessions));
}

Metrics::PromptCacheCounters Metrics::prompt_cache_counters(std::string_view model) {
  return {&prompt_segments_->Add({{"model", std::string(model)}, {"result", "hit"}}),
          &prompt_segments_->Add({{"model", std::string(model)}, {"result", "miss"}}),
          &template_iterations_->Add({{"model", std::string(model)}, {"result", "replayed"}}),
          &template_iterations_->Add({{"model", std::string(model)}, {"result", "evaluated"}})};
}

void Metrics::template_error(std::string_view model) {
  template_errors_->Add({{"model", std::string(model)}}).Increment();
}

void Metrics::forget_worker(std::string_view worker) {
  worker_up_.Remove(&worker_up_.Add({{"worker", std::string(worker)}}));
  worker_in_flight_.Remove(&worker_in_flight_.Add({{"worker", std::string(worker)}}));
  for (auto* family : {&worker_pending_prefill_, &worker_recent_ttft_, &kv_events_connected_, &kv_events_stale_,
                       &kv_events_silent_, &index_blocks_, index_drifting_, prefill_ms_per_token_,
                       prefill_ms_per_token_pair_, prefill_base_ms_, prefill_samples_, worker_ejected_}) {
    if (family->Has({{"worker", std::string(worker)}})) {
      family->Remove(&family->Add({{"worker", std::string(worker)}}));
    }
  }
}

std::string Metrics::serialize() const {
  prometheus::TextSerializer serializer;
  return serializer.Serialize(registry_->Collect());
}

}  // namespace kvgate::obs
