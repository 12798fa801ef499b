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
      ended_(other.ended_),
      completed_(other.completed_) {}

Attempt::~Attempt() {
  if (router_ != nullptr && !ended_) {
    in_flight_.finish();
    router_->withdraw(*this);
  }
}

void Attempt::end(AttemptEnd how, std::optional<workers::FailureCause> traffic, std::uint64_t now_ms) {
  if (router_ == nullptr || ended_) {
    return;
  }
  ended_ = true;
  in_flight_.finish();
  if (how == AttemptEnd::not_run) {
    router_->withdraw(*this);
  } else {
    router_->finish(*this);
  }
  if (traffic) {
    router_->note_traffic(*this, *traffic, now_ms);
  }
}

void Attempt::complete(const ResponseOutcome& outcome) {
  if (router_ == nullptr || completed_) {
    return;
  }
  completed_ = true;
  router_->record_outcome(*this, outcome);
}

}  // namespace kvgate::route
