#include "kvgate/obs/metrics.hpp"

#include <algorithm>

#include <prometheus/text_serializer.h>

#include "kvgate/obs/worker_series.hpp"

namespace kvgate::obs {
namespace {

using prometheus::BuildCounter;
using prometheus::BuildGauge;
using prometheus::BuildHistogram;

std::string status_label(int status) {
  return status == 0 ? "none" : std::to_string(status);
}

// Ratios of cached to prompt tokens.
const prometheus::Histogram::BucketBoundaries& ratio_buckets() {
  static const prometheus::Histogram::BucketBoundaries kBuckets{0.1, 0.2, 0.3, 0.4,  0.5, 0.6,
                                                                0.7, 0.8, 0.9, 0.95, 0.99};
  return kBuckets;
}

}  // namespace

Metrics::Metrics()
    : registry_(std::make_shared<prometheus::Registry>()),
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
      retries_(BuildCounter()
                   .Name("kvgate_retries_total")
                   .Help("Requests sent again to another worker after a failure before any response byte")
                   .Register(*registry_)),
      client_errors_(BuildCounter()
                         .Name("kvgate_client_errors_total")
                         .Help("Requests rejected by kvgate itself, by status and error code")
                         .Register(*registry_)),
      config_reloads_(BuildCounter()
                          .Name("kvgate_config_reloads_total")
                          .Help("Configuration reloads (SIGHUP), by result")
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

Metrics::RequestSeries Metrics::request_series(std::string_view model) {
  std::string model_label(model.empty() ? "none" : model);
  RequestSeries series;
  series.duration = &request_duration_.Add({{"model", model_label}}, latency_buckets());
  series.first_byte = &first_byte_.Add({{"model", model_label}}, latency_buckets());
  return series;
}

prometheus::Counter& Metrics::unrouted_requests(std::string_view model, int status) {
  return requests_.Add(
      {{"model", std::string(model.empty() ? "none" : model)}, {"worker", "none"}, {"status", status_label(status)}});
}

void ThreadMetrics::request_finished(std::string_view model, WorkerSeries* worker, int status, double duration_seconds,
                                     double first_byte_seconds, double first_token_seconds) {
  key_.clear();
  key_.append(model).push_back('\n');
  key_.append(std::to_string(status));
  auto found = series_.find(std::string_view(key_));
  if (found == series_.end()) {
    found = series_.emplace(key_, metrics_.request_series(model)).first;
  }
  if (worker != nullptr) {
    worker->request_finished(status, first_token_seconds);
  } else {
    if (found->second.unrouted == nullptr) {
      found->second.unrouted = &metrics_.unrouted_requests(model, status);
    }
    found->second.unrouted->Increment();
  }
  found->second.duration->Observe(duration_seconds);
  if (first_byte_seconds >= 0) {
    found->second.first_byte->Observe(first_byte_seconds);
  }
}

void Metrics::declare_model(std::string_view model) {
  const std::string name(model);
  retries_.Add({{"model", name}});
  retries_denied_->Add({{"model", name}});
  template_errors_->Add({{"model", name}});
  for (const char* reason : {"moved_queue", "moved_evicted", "moved_unhealthy", "moved_better_prefix"}) {
    session_moves_->Add({{"model", name}, {"reason", reason}});
  }
  session_turn_hit_->Add({{"model", name}}, ratio_buckets());
  request_duration_.Add({{"model", name}}, latency_buckets());
  first_byte_.Add({{"model", name}}, latency_buckets());
}

void Metrics::declare_tenant(std::string_view tenant) {
  const std::string name(tenant);
  for (const char* reason :
       {"requests_per_minute", "prompt_tokens_per_minute", "queue_full", "queue_timeout", "abandoned"}) {
    admission_rejections_->Add({{"tenant", name}, {"reason", reason}});
  }
}

void Metrics::declare_client_error(int status, std::string_view code) {
  client_errors_.Add({{"status", status_label(status)}, {"code", std::string(code)}});
}

std::string Metrics::serialize(std::span<const WorkerSeries* const> workers) const {
  // One family per name: the workers' registries hold the same families as
  // each other (and kvgate_requests_total as this one), merged here.
  auto families = registry_->Collect();
  for (const auto* worker : workers) {
    for (auto& family : worker->registry().Collect()) {
      auto same = std::find_if(families.begin(), families.end(),
                               [&](const prometheus::MetricFamily& known) { return known.name == family.name; });
      if (same == families.end()) {
        families.push_back(std::move(family));
      } else {
        same->metric.insert(same->metric.end(), std::make_move_iterator(family.metric.begin()),
                            std::make_move_iterator(family.metric.end()));
      }
    }
  }
  prometheus::TextSerializer serializer;
  return serializer.Serialize(families);
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

void Metrics::client_error(int status, std::string_view code) {
  client_errors_.Add({{"status", status_label(status)}, {"code", std::string(code)}}).Increment();
}

void Metrics::connection_rejected() {
  connections_rejected_->Increment();
}

void Metrics::config_reload(bool success) {
  config_reloads_.Add({{"result", success ? "success" : "failure"}}).Increment();
}

void Metrics::index_evictions(std::uint64_t entries) {
  index_evictions_->Increment(static_cast<double>(entries));
}

void Metrics::session_move(std::string_view model, std::string_view reason) {
  session_moves_->Add({{"model", std::string(model)}, {"reason", std::string(reason)}}).Increment();
}

void Metrics::session_turn_hit(std::string_view model, double ratio) {
  session_turn_hit_->Add({{"model", std::string(model)}}, ratio_buckets()).Observe(ratio);
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

}  // namespace kvgate::obs
