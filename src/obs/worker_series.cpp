#include "kvgate/obs/worker_series.hpp"

#include <algorithm>

namespace kvgate::obs {

using prometheus::BuildCounter;
using prometheus::BuildGauge;
using prometheus::BuildHistogram;

const prometheus::Histogram::BucketBoundaries& latency_buckets() {
  static const prometheus::Histogram::BucketBoundaries kBuckets{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
                                                                1,     2.5,    5,     10,   30,    60,   120, 300};
  return kBuckets;
}

std::string_view to_string(UpstreamErrorKind kind) {
  switch (kind) {
    case UpstreamErrorKind::connect:
      return "connect";
    case UpstreamErrorKind::connect_timeout:
      return "connect_timeout";
    case UpstreamErrorKind::timeout:
      return "timeout";
    case UpstreamErrorKind::reset:
      return "reset";
    case UpstreamErrorKind::status_5xx:
      return "status_5xx";
    case UpstreamErrorKind::stream_interrupted:
      return "stream_interrupted";
  }
  return "unknown";
}

std::string_view to_string(ScrapeResult result) {
  switch (result) {
    case ScrapeResult::success:
      return "success";
    case ScrapeResult::failure:
      return "failure";
    case ScrapeResult::skipped:
      return "skipped";
  }
  return "failure";
}

std::string_view to_string(PredictionOutcome outcome) {
  switch (outcome) {
    case PredictionOutcome::exact:
      return "exact";
    case PredictionOutcome::over:
      return "over";
    case PredictionOutcome::under:
      return "under";
  }
  return "exact";
}

std::string_view to_string(KvEventType type) {
  switch (type) {
    case KvEventType::block_stored:
      return "BlockStored";
    case KvEventType::block_removed:
      return "BlockRemoved";
    case KvEventType::all_blocks_cleared:
      return "AllBlocksCleared";
    case KvEventType::unknown:
      return "unknown";
    case KvEventType::malformed:
      return "malformed";
  }
  return "unknown";
}

namespace {

// The failure causes a worker is ejected for (workers::FailureCause's names).
constexpr std::array<std::string_view, 4> kEjectionCauses{"connect", "status_5xx", "reset", "timeout"};

}  // namespace

WorkerSeries::WorkerSeries(std::string_view model, std::string_view worker)
    : model_(model), worker_(worker), registry_(std::make_shared<prometheus::Registry>()) {
  const std::string& worker_id = worker_;
  auto& registry = *registry_;
  // Every series below carries the worker label (as a child label, not a
  // family's constant one, so the exposition lists labels in name order as
  // the gateway's own series do).
  auto labelled = [&](prometheus::Labels labels) {
    labels.emplace("worker", worker_id);
    return labels;
  };
  requests_ = &BuildCounter()
                   .Name("kvgate_requests_total")
                   .Help("Requests answered, by model, worker (none when not routed) and HTTP status")
                   .Register(registry);
  // Declared at 0: the status every healthy worker answers.
  requests_by_status_[200] = &requests_->Add(labelled({{"model", model_}, {"status", "200"}}));
  first_token_ = &BuildHistogram()
                      .Name("kvgate_time_to_first_token_seconds")
                      .Help(
                          "Time from the request read to a stream's first data event (the first token), by model "
                          "and worker")
                      .Register(registry)
                      .Add(labelled({{"model", model_}}), latency_buckets());
  auto& upstream_errors = BuildCounter()
                              .Name("kvgate_upstream_errors_total")
                              .Help(
                                  "Failures talking to a worker, by kind (connect, connect_timeout, timeout, reset, "
                                  "status_5xx, stream_interrupted)")
                              .Register(registry);
  for (const auto kind : kUpstreamErrorKinds) {
    upstream_errors_[static_cast<std::size_t>(kind)] =
        &upstream_errors.Add(labelled({{"kind", std::string(to_string(kind))}}));
  }
  prompt_tokens_ = &BuildCounter()
                        .Name("kvgate_prompt_tokens_total")
                        .Help("Prompt tokens of routed requests answered 200 with usage, as the engine counted them")
                        .Register(registry)
                        .Add(labelled({{"model", model_}}));
  cached_prompt_tokens_ = &BuildCounter()
                               .Name("kvgate_cached_prompt_tokens_total")
                               .Help(
                                   "Of kvgate_prompt_tokens_total, those the engine reported served from its "
                                   "prefix cache (prompt_tokens_details.cached_tokens)")
                               .Register(registry)
                               .Add(labelled({{"model", model_}}));
  auto& predictions = BuildCounter()
                          .Name("kvgate_cache_predictions_total")
                          .Help(
                              "Routed requests whose engine reported cached tokens, by whether kvgate's "
                              "prediction was exact, over or under the engine's figure")
                          .Register(registry);
  for (const auto outcome : {PredictionOutcome::exact, PredictionOutcome::over, PredictionOutcome::under}) {
    cache_predictions_[static_cast<std::size_t>(outcome)] =
        &predictions.Add(labelled({{"outcome", std::string(to_string(outcome))}}));
  }
  ejections_ = &BuildCounter()
                    .Name("kvgate_worker_ejections_total")
                    .Help(
                        "Times a worker was taken out of routing after consecutive traffic failures, by the last "
                        "failure's cause (connect, status_5xx, reset, timeout)")
                    .Register(registry);
  for (const auto cause : kEjectionCauses) {
    ejections_->Add(labelled({{"cause", std::string(cause)}}));
  }
  auto& health = BuildCounter()
                     .Name("kvgate_health_checks_total")
                     .Help("Active health checks, by worker and result")
                     .Register(registry);
  health_success_ = &health.Add(labelled({{"result", "success"}}));
  health_failure_ = &health.Add(labelled({{"result", "failure"}}));
  auto& scrapes =
      BuildCounter()
          .Name("kvgate_worker_scrapes_total")
          .Help(
              "Scrapes of the workers' /metrics, by worker and result (success, failure, skipped: the last one had "
              "not answered yet)")
          .Register(registry);
  for (const auto result : {ScrapeResult::success, ScrapeResult::failure, ScrapeResult::skipped}) {
    scrapes_[static_cast<std::size_t>(result)] = &scrapes.Add(labelled({{"result", std::string(to_string(result))}}));
  }
  auto& events = BuildCounter()
                     .Name("kvgate_kv_events_total")
                     .Help(
                         "KV-cache events received from the worker's engine, by event type (unknown and malformed "
                         "events are counted and skipped)")
                     .Register(registry);
  for (const auto type : {KvEventType::block_stored, KvEventType::block_removed, KvEventType::all_blocks_cleared,
                          KvEventType::unknown, KvEventType::malformed}) {
    kv_events_[static_cast<std::size_t>(type)] = &events.Add(labelled({{"type", std::string(to_string(type))}}));
  }
  gaps_ = &BuildCounter()
               .Name("kvgate_kv_event_gaps_total")
               .Help("Sequence gaps seen in the worker's KV-event stream")
               .Register(registry)
               .Add(labelled({}));
  auto& replays = BuildCounter()
                      .Name("kvgate_kv_event_replays_total")
                      .Help("Replay requests sent after a gap, by outcome (closed, failed)")
                      .Register(registry);
  replays_closed_ = &replays.Add(labelled({{"outcome", "closed"}}));
  replays_failed_ = &replays.Add(labelled({{"outcome", "failed"}}));
  resets_ = &BuildCounter()
                 .Name("kvgate_kv_event_resets_total")
                 .Help("Engine restarts detected from the KV-event sequence; the worker's entries were dropped")
                 .Register(registry)
                 .Add(labelled({}));
  decode_errors_ = &BuildCounter()
                        .Name("kvgate_kv_event_decode_errors_total")
                        .Help("KV-event messages that could not be decoded (skipped)")
                        .Register(registry)
                        .Add(labelled({}));
  unindexable_ = &BuildCounter()
                      .Name("kvgate_index_unindexable_blocks_total")
                      .Help(
                          "Stored blocks no request can match (unknown parent, other block size, multimodal "
                          "inputs, a cache group kvgate does not model): not indexed")
                      .Register(registry)
                      .Add(labelled({}));
  auto& adapter_placements =
      BuildCounter()
          .Name("kvgate_adapter_placements_total")
          .Help(
              "Requests for a LoRA adapter placed on the worker, by where the adapter stood there at the decision "
              "(resident; loadable: a load into a free slot; evicts: a load that evicts another adapter; waiting: a "
              "load already under way)")
          .Register(registry);
  for (const auto state : {policy::AdapterState::resident, policy::AdapterState::loadable, policy::AdapterState::evicts,
                           policy::AdapterState::waiting}) {
    adapter_placements_[static_cast<std::size_t>(state)] =
        &adapter_placements.Add(labelled({{"model", model_}, {"state", std::string(policy::to_string(state))}}));
  }
  auto gauge = [&](const char* name, const char* help) {
    return &BuildGauge().Name(name).Help(help).Register(registry).Add(labelled({}));
  };
  up_ = gauge("kvgate_worker_up", "1 when the worker is healthy and eligible for routing");
  in_flight_ = gauge("kvgate_worker_in_flight_requests", "Requests dispatched to the worker and not yet finished");
  pending_prefill_ = gauge("kvgate_worker_pending_prefill_tokens",
                           "Uncached prompt tokens dispatched to the worker whose answer has not started");
  recent_ttft_ = &BuildGauge()
                      .Name("kvgate_worker_recent_ttft_seconds")
                      .Help(
                          "Recent time to first token of the worker's streamed answers, measured by the gateway "
                          "(exponentially weighted, about the last ten)")
                      .Register(registry);
  ttft_calibration_ = &BuildGauge()
                           .Name("kvgate_worker_ttft_calibration")
                           .Help(
                               "The worker's realized time to first token over the router's expectation, for its "
                               "last 128 clean streamed answers: ratio_p50, ratio_p90, and relative_error_p50 "
                               "(|realized - expected| / realized), once there is one; samples: how many")
                           .Register(registry);
  prefill_per_token_ = gauge("kvgate_worker_prefill_seconds_per_token",
                             "Learned prefill cost per uncached prompt token (also prices the queue)");
  prefill_per_token_pair_ = gauge("kvgate_worker_prefill_seconds_per_token_pair",
                                  "Learned causal-attention cost per (query, context) token pair of a prefill");
  prefill_base_ = gauge("kvgate_worker_prefill_base_seconds",
                        "Learned fixed part of a prefill (a scheduler step, the network hop)");
  prefill_samples_ = gauge("kvgate_worker_prefill_fit_samples",
                           "Completed streamed requests the worker's prefill cost was learned from (0: the "
                           "configured priors)");
  ejected_ = gauge("kvgate_worker_ejected", "1 while the worker is out of routing after consecutive traffic failures");
  drifting_ = gauge("kvgate_index_drifting",
                    "1 while the worker's cache predictions persistently exceed what its engine reports; its index "
                    "is not credited meanwhile");
  index_blocks_ = gauge("kvgate_index_blocks", "Blocks the prefix index credits to the worker");
  up_->Set(1);
  auto stream_gauge = [&](const char* name, const char* help) {
    return &BuildGauge().Name(name).Help(help).Register(registry);
  };
  connected_ = stream_gauge("kvgate_kv_events_connected", "1 while the worker's KV-event publisher is connected");
  stale_ = stream_gauge("kvgate_kv_events_stale",
                        "1 while the worker's events are known incomplete (unclosed gap); it is routed in approximate "
                        "mode meanwhile");
  silent_ = stream_gauge("kvgate_kv_events_silent",
                         "1 when the worker got traffic but its configured event stream sent nothing");
}

void WorkerSeries::request_finished(int status, double first_token_seconds) {
  const auto slot = static_cast<std::size_t>(std::clamp(status, 0, kStatuses - 1));
  auto* counter = requests_by_status_[slot].load(std::memory_order_acquire);
  if (counter == nullptr) {
    // Family::Add returns the existing child when two threads race here.
    counter = &requests_->Add(
        {{"model", model_}, {"worker", worker_}, {"status", status == 0 ? "none" : std::to_string(status)}});
    requests_by_status_[slot].store(counter, std::memory_order_release);
  }
  counter->Increment();
  if (first_token_seconds >= 0) {
    first_token_->Observe(first_token_seconds);
  }
}

void WorkerSeries::prompt_tokens(std::uint32_t prompt, std::uint32_t cached) {
  prompt_tokens_->Increment(prompt);
  cached_prompt_tokens_->Increment(std::min(cached, prompt));
}

void WorkerSeries::ejected(std::string_view cause) {
  ejections_->Add({{"worker", worker_}, {"cause", std::string(cause)}}).Increment();
}

void WorkerSeries::set_state(const State& state) {
  up_->Set(state.up ? 1 : 0);
  in_flight_->Set(state.in_flight);
  pending_prefill_->Set(static_cast<double>(state.pending_prefill_tokens));
  if (state.recent_ttft_seconds) {
    recent_ttft_->Add({{"worker", worker_}}).Set(*state.recent_ttft_seconds);
  }
  ttft_calibration_->Add({{"worker", worker_}, {"quantity", "samples"}})
      .Set(state.ttft_calibration ? static_cast<double>(state.ttft_calibration->samples) : 0.0);
  if (const auto& calibration = state.ttft_calibration) {
    for (auto [quantity, value] :
         {std::pair{"ratio_p50", calibration->ratio_p50}, std::pair{"ratio_p90", calibration->ratio_p90},
          std::pair{"relative_error_p50", calibration->relative_error_p50}}) {
      ttft_calibration_->Add({{"worker", worker_}, {"quantity", quantity}}).Set(value);
    }
  }
  prefill_per_token_->Set(state.prefill_ms_per_token / 1000);
  prefill_per_token_pair_->Set(state.prefill_ms_per_token_pair / 1000);
  prefill_base_->Set(state.prefill_base_ms / 1000);
  prefill_samples_->Set(static_cast<double>(state.prefill_samples));
  ejected_->Set(state.ejected ? 1 : 0);
  drifting_->Set(state.drifting ? 1 : 0);
}

void WorkerSeries::set_event_stream_state(const EventStreamState& state) {
  index_blocks_->Set(static_cast<double>(state.index_blocks));
  // The stream's gauges exist only for a worker with an event stream.
  const prometheus::Labels labels{{"worker", worker_}};
  for (auto [family, value] :
       {std::pair{connected_, state.connected}, std::pair{stale_, state.stale}, std::pair{silent_, state.silent}}) {
    if (state.configured) {
      family->Add(labels).Set(value ? 1 : 0);
    } else if (family->Has(labels)) {
      family->Remove(&family->Add(labels));
    }
  }
}

}  // namespace kvgate::obs
