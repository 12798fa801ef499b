#include "kvgate/kv_events/sequence_tracker.hpp"

#include <algorithm>

namespace kvgate::kv_events {

using Kind = SequenceAction::Kind;

SequenceTracker::SequenceTracker(SequenceSettings settings, std::uint64_t now_ms)
    : settings_(settings), last_event_ms_(now_ms) {}

SequenceActions SequenceTracker::on_live(EventMessage message, std::uint64_t now_ms) {
  SequenceActions actions;
  if (replaying_) {
    held_.push_back(std::move(message));
    if (held_.size() > settings_.max_held_batches) {
      finish_replay(false, false, now_ms, actions);
    }
    return actions;
  }
  const auto sequence = message.sequence;
  if (last_sequence_ &&
      (sequence <= *last_sequence_ || (disconnected_since_last_ && sequence != *last_sequence_ + 1))) {
    actions.push_back({Kind::engine_restarted});
    last_sequence_.reset();
  }
  disconnected_since_last_ = false;
  if (!last_sequence_) {
    if (sequence > 0 && settings_.replay_available) {
      held_.push_back(std::move(message));
      start_replay(0, /*late_join=*/true, now_ms, actions);
      return actions;
    }
    apply(std::move(message), now_ms, actions);
    return actions;
  }
  if (sequence == *last_sequence_ + 1) {
    apply(std::move(message), now_ms, actions);
    return actions;
  }
  SequenceAction gap{Kind::gap};
  gap.expected = *last_sequence_ + 1;
  gap.got = sequence;
  actions.push_back(std::move(gap));
  if (settings_.replay_available) {
    const auto from = *last_sequence_ + 1;
    held_.push_back(std::move(message));
    start_replay(from, /*late_join=*/false, now_ms, actions);
    return actions;
  }
  mark_stale(now_ms, actions);
  apply(std::move(message), now_ms, actions);
  return actions;
}

void SequenceTracker::start_replay(std::uint64_t from, bool late_join, std::uint64_t now_ms, SequenceActions& actions) {
  replaying_ = true;
  replay_late_join_ = late_join;
  replay_missed_ = false;
  replay_next_ = from;
  replay_deadline_ms_ = now_ms + settings_.replay_timeout_ms;
  SequenceAction request{Kind::request_replay};
  request.expected = from;
  actions.push_back(std::move(request));
}

SequenceActions SequenceTracker::on_replay(EventMessage message, std::uint64_t now_ms) {
  SequenceActions actions;
  if (!replaying_) {
    return actions;  // a late answer to a replay already given up
  }
  if (message.sequence == kEndOfReplay) {
    finish_replay(true, false, now_ms, actions);
    return actions;
  }
  if (message.sequence < replay_next_) {
    return actions;  // already applied
  }
  if (message.sequence > replay_next_) {
    replay_missed_ = true;  // the engine's buffer no longer reaches back far enough
  }
  replay_next_ = message.sequence + 1;
  apply(std::move(message), now_ms, actions);
  return actions;
}

// The replay ended (or timed out, or held too much): apply the held live
// batches in order; anything still missing is lost for good.
void SequenceTracker::finish_replay(bool ended, bool timed_out, std::uint64_t now_ms, SequenceActions& actions) {
  replaying_ = false;
  bool missed = replay_missed_ || !ended;
  auto held = std::move(held_);
  held_.clear();
  for (auto& message : held) {
    if (message.sequence < replay_next_) {
      continue;
    }
    missed = missed || message.sequence > replay_next_;
    replay_next_ = message.sequence + 1;
    apply(std::move(message), now_ms, actions);
  }
  if (!ended) {
    actions.push_back({Kind::reopen_replay_socket});
  }
  SequenceAction finished{Kind::replay_finished};
  finished.closed = !missed;
  finished.late_join = replay_late_join_;
  finished.timed_out = timed_out;
  actions.push_back(std::move(finished));
  if (missed && !replay_late_join_) {
    mark_stale(now_ms, actions);
  }
}

void SequenceTracker::apply(EventMessage message, std::uint64_t now_ms, SequenceActions& actions) {
  last_sequence_ = message.sequence;
  SequenceAction apply{Kind::apply};
  apply.message = std::move(message);
  actions.push_back(std::move(apply));
  last_event_ms_ = now_ms;
  unreported_blocks_ = 0;
  if (silent_) {
    silent_ = false;
    actions.push_back({Kind::silent_ended});
  }
}

void SequenceTracker::mark_stale(std::uint64_t now_ms, SequenceActions& actions) {
  stale_until_ms_ = now_ms + settings_.approximate_ttl_ms;
  // Also when already stale: the events forgotten now include the newer ones.
  actions.push_back({Kind::stale_started});
  stale_ = true;
}

void SequenceTracker::on_routed(std::uint64_t new_blocks, std::uint64_t now_ms) {
  if (new_blocks == 0) {
    return;
  }
  if (unreported_blocks_ == 0) {
    unreported_since_ms_ = now_ms;
  }
  unreported_blocks_ += new_blocks;
}

SequenceActions SequenceTracker::on_tick(std::uint64_t now_ms) {
  SequenceActions actions;
  if (replaying_ && now_ms >= replay_deadline_ms_) {
    finish_replay(false, /*timed_out=*/true, now_ms, actions);
  }
  if (stale_ && now_ms >= stale_until_ms_) {
    stale_ = false;
    actions.push_back({Kind::stale_ended});
  }
  // New blocks were routed here but no batch came for silence_after: the
  // engine is probably not publishing (kv-events-config missing, wrong
  // address, a firewall).
  if (!silent_ && unreported_blocks_ > 0 &&
      now_ms - std::max(unreported_since_ms_, last_event_ms_) >= settings_.silence_after_ms) {
    silent_ = true;
    actions.push_back({Kind::silent_started});
  }
  return actions;
}

}  // namespace kvgate::kv_events
