#include "kvgate/proxy/request_stats.hpp"

namespace kvgate::proxy {

using prometheus::BuildCounter;
using prometheus::BuildGauge;
using prometheus::BuildHistogram;

RequestStats::RequestStats(prometheus::Registry& registry)
    : requests_(BuildCounter()
                    .Name("kvgate_requests_total")
                    .Help("Requests answered, by model, worker (none when not routed) and HTTP status")
                    .Register(registry)),
      request_duration_(BuildHistogram()
                            .Name("kvgate_request_duration_seconds")
                            .Help("Time from the request's last byte read to the response's last byte written")
                            .Register(registry)),
      first_byte_(BuildHistogram()
                      .Name("kvgate_time_to_first_byte_seconds")
                      .Help("Time from the request read to the first response byte from the worker")
                      .Register(registry)),
      retries_(BuildCounter()
                   .Name("kvgate_retries_total")
                   .Help("Requests sent again to another worker after a failure before any response byte")
                   .Register(registry)),
      retries_denied_(BuildCounter()
                          .Name("kvgate_retries_denied_total")
                          .Help("Retries the retry budget refused (the client got the attempt's error)")
                          .Register(registry)),
      prefill_placements_(BuildCounter()
                              .Name("kvgate_prefill_placements_total")
                              .Help("Disaggregated requests' prefills by where they ran: local_prefill (on the "
                                    "decoder), remote_prefill (on a prefill worker), prefill_unavailable (on the "
                                    "decoder, no prefill worker could take it)")
                              .Register(registry)),
      prefill_failures_(BuildCounter()
                            .Name("kvgate_prefill_failures_total")
                            .Help("Remote prefills that failed before the decoder answered (the request was "
                                  "decided again: another prefill worker, or the decoder)")
                            .Register(registry)),
      client_errors_(BuildCounter()
                         .Name("kvgate_client_errors_total")
                         .Help("Requests rejected by kvgate itself, by status and error code")
                         .Register(registry)),
      template_errors_(BuildCounter()
                           .Name("kvgate_chat_template_errors_total")
                           .Help("Chat requests whose model's chat template failed to render (answered 400)")
                           .Register(registry)),
      prompt_segments_(BuildCounter()
                           .Name("kvgate_tokenizer_segments_total")
                           .Help("Prompt sections (text between special tokens) of exactly tokenised requests, by "
                                 "whether the segment cache had their ids (hit) or they were encoded (miss)")
                           .Register(registry)),
      template_iterations_(BuildCounter()
                               .Name("kvgate_template_iterations_total")
                               .Help("Chat-template loop iterations (mostly one per message) of exactly tokenised "
                                     "requests, by whether the render cache replayed them or they were evaluated")
                               .Register(registry)),
      connections_rejected_(BuildCounter()
                                .Name("kvgate_connections_rejected_total")
                                .Help("Client connections closed at accept because max_connections was reached")
                                .Register(registry)
                                .Add({})),
      in_flight_requests_(BuildGauge()
                              .Name("kvgate_in_flight_requests")
                              .Help("Requests being served right now")
                              .Register(registry)
                              .Add({})),
      open_connections_(
          BuildGauge().Name("kvgate_client_connections").Help("Open client connections").Register(registry).Add({})) {}

void RequestStats::declare_model(std::string_view model, bool disaggregated) {
  const std::string name(model);
  if (disaggregated) {
    placement_counters(model);
    prefill_failures_.Add({{"model", name}});
  }
  retries_.Add({{"model", name}});
  retries_denied_.Add({{"model", name}});
  template_errors_.Add({{"model", name}});
  request_duration_.Add({{"model", name}}, obs::latency_buckets());
  first_byte_.Add({{"model", name}}, obs::latency_buckets());
}

void RequestStats::declare_client_error(int status, std::string_view code) {
  client_errors_.Add({{"status", obs::status_label(status)}, {"code", std::string(code)}});
}

RequestStats::ModelSeries RequestStats::model_series(std::string_view model) {
  std::string model_label(model.empty() ? "none" : model);
  ModelSeries series;
  series.duration = &request_duration_.Add({{"model", model_label}}, obs::latency_buckets());
  series.first_byte = &first_byte_.Add({{"model", model_label}}, obs::latency_buckets());
  return series;
}

prometheus::Counter& RequestStats::unrouted_requests(std::string_view model, int status) {
  return requests_.Add({{"model", std::string(model.empty() ? "none" : model)},
                        {"worker", "none"},
                        {"status", obs::status_label(status)}});
}

RequestStats::PromptCacheCounters RequestStats::prompt_cache_counters(std::string_view model) {
  const std::string name(model);
  return {&prompt_segments_.Add({{"model", name}, {"result", "hit"}}),
          &prompt_segments_.Add({{"model", name}, {"result", "miss"}}),
          &template_iterations_.Add({{"model", name}, {"result", "replayed"}}),
          &template_iterations_.Add({{"model", name}, {"result", "evaluated"}})};
}

RequestStats::PlacementCounters RequestStats::placement_counters(std::string_view model) {
  PlacementCounters counters;
  const std::string name(model);
  std::size_t index = 0;
  for (const auto reason :
       {policy::Reason::local_prefill, policy::Reason::remote_prefill, policy::Reason::prefill_unavailable}) {
    counters.by_reason[index++] =
        &prefill_placements_.Add({{"model", name}, {"placement", std::string(policy::to_string(reason))}});
  }
  return counters;
}

void RequestStats::client_error(int status, std::string_view code) {
  client_errors_.Add({{"status", obs::status_label(status)}, {"code", std::string(code)}}).Increment();
}

void ThreadStats::request_finished(std::string_view model, obs::WorkerSeries* worker, int status,
                                   double duration_seconds, double first_byte_seconds, double first_token_seconds) {
  key_.clear();
  key_.append(model).push_back('\n');
  key_.append(std::to_string(status));
  auto found = series_.find(std::string_view(key_));
  if (found == series_.end()) {
    found = series_.emplace(key_, shared_.model_series(model)).first;
  }
  if (worker != nullptr) {
    worker->request_finished(status, first_token_seconds);
  } else {
    if (found->second.unrouted == nullptr) {
      found->second.unrouted = &shared_.unrouted_requests(model, status);
    }
    found->second.unrouted->Increment();
  }
  found->second.duration->Observe(duration_seconds);
  if (first_byte_seconds >= 0) {
    found->second.first_byte->Observe(first_byte_seconds);
  }
}

void ThreadStats::prefill_placement(std::string_view model, policy::Reason placement) {
  auto found = placements_.find(model);
  if (found == placements_.end()) {
    found = placements_.emplace(std::string(model), shared_.placement_counters(model)).first;
  }
  const std::size_t index = placement == policy::Reason::local_prefill    ? 0
                            : placement == policy::Reason::remote_prefill ? 1
                                                                          : 2;
  found->second.by_reason[index]->Increment();
}

void ThreadStats::prompt_caches(std::string_view model, const PromptCacheCounts& counts) {
  auto found = prompt_caches_.find(model);
  if (found == prompt_caches_.end()) {
    found = prompt_caches_.emplace(std::string(model), shared_.prompt_cache_counters(model)).first;
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

}  // namespace kvgate::proxy
