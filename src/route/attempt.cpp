#include "kvgate/route/attempt.hpp"

#include <utility>

#include "kvgate/route/router.hpp"

namespace kvgate::route {

Attempt::Attempt(Router& router, const RoutingTable& table, const ModelRoute& model, std::size_t worker,
                 workers::InFlightRequest in_flight)
    : router_(&router), table_(&table), model_(&model), worker_(worker), in_flight_(std::move(in_flight)) {}

Attempt::Attempt(Attempt&& other) noexcept
    : router_(std::exchange(other.router_, nullptr)),
      table_(other.table_),
      model_(other.model_),
      worker_(other.worker_),
      in_flight_(std::move(other.in_flight_)),
      prediction_(other.prediction_),
      ticket_(other.ticket_),
      session_turn_(other.session_turn_),
      session_key_(std::move(other.session_key_)),
      blocks_(std::move(other.blocks_)),
      prefill_(std::move(other.prefill_)),
      slot_times_(other.slot_times_),
      decoder_assumed_(other.decoder_assumed_),
      ended_(other.ended_),
      completed_(other.completed_),
      slot_freed_(other.slot_freed_) {}

Attempt::~Attempt() {
  if (router_ != nullptr && prefill_ && !prefill_->ended) {
    prefill_->ended = true;
    static_cast<void>(prefill_->in_flight.finish(0));  // no time known: released as of its dispatch
    router_->withdraw(*this, prefill_->worker);
  }
  if (router_ != nullptr && !ended_) {
    static_cast<void>(in_flight_.finish(0));
    router_->withdraw(*this, worker_);
  }
}

void Attempt::end_prefill(AttemptEnd how, std::optional<workers::FailureCause> traffic, std::uint64_t now_ms) {
  if (router_ == nullptr || !prefill_ || prefill_->ended) {
    return;
  }
  prefill_->ended = true;
  static_cast<void>(prefill_->in_flight.finish(now_ms));
  if (how == AttemptEnd::not_run) {
    router_->withdraw(*this, prefill_->worker);
  } else if (!ended_) {
    router_->assume_on_decoder(*this);
  }
  if (traffic) {
    router_->note_traffic(*this, prefill_->worker, *traffic, now_ms);
  }
}

void Attempt::prefill_answered(std::optional<std::uint32_t> cached_tokens, std::optional<std::uint32_t> prompt_tokens) {
  if (router_ != nullptr && prefill_) {
    router_->record_prefill_outcome(*this, cached_tokens, prompt_tokens);
  }
}

void Attempt::end(AttemptEnd how, std::optional<workers::FailureCause> traffic, std::uint64_t now_ms) {
  if (router_ == nullptr || ended_) {
    return;
  }
  if (prefill_ && !prefill_->ended) {
    // The prefill worker ran the prompt either way; the decoder holds it
    // only if it ran there too.
    prefill_->ended = true;
    static_cast<void>(prefill_->in_flight.finish(now_ms));
    if (how == AttemptEnd::served) {
      router_->assume_on_decoder(*this);
    }
  }
  ended_ = true;
  keep_slot_times(in_flight_.finish(now_ms));
  if (how == AttemptEnd::not_run) {
    router_->withdraw(*this, worker_);
  } else if (!slot_freed_) {
    router_->finish(*this);
  }
  if (traffic) {
    router_->note_traffic(*this, worker_, *traffic, now_ms);
  }
}

void Attempt::engine_done(std::uint64_t now_ms, const EngineAnswer& answer) {
  keep_slot_times(in_flight_.finish(now_ms));
  if (router_ == nullptr || ended_ || slot_freed_ || answer.status != 200) {
    return;
  }
  slot_freed_ = true;
  router_->answer_read(*this, answer, now_ms);
}

void Attempt::complete(const ResponseOutcome& outcome) {
  if (router_ == nullptr || completed_) {
    return;
  }
  completed_ = true;
  router_->record_outcome(*this, outcome);
}

}  // namespace kvgate::route
