#include "kvgate/route/session_stats.hpp"

#include <prometheus/counter.h>

#include <cmath>
#include <map>
#include <string>

#include "kvgate/obs/exposition.hpp"

namespace kvgate::route {

SessionStats::SessionStats(prometheus::Registry& registry)
    : moves_(prometheus::BuildCounter()
                 .Name("kvgate_session_moves_total")
                 .Help("Session turns routed away from the session's previous worker, by reason (moved_queue, "
                       "moved_evicted, moved_unhealthy, moved_better_prefix)")
                 .Register(registry)),
      move_prefill_(prometheus::BuildCounter()
                        .Name("kvgate_session_move_prefill_tokens_total")
                        .Help("Prompt tokens the previous worker of a moved session turn held beyond the chosen "
                              "worker's: the prefill the moves added, by reason")
                        .Register(registry)),
      turn_hit_(prometheus::BuildHistogram()
                    .Name("kvgate_session_turn_hit_ratio")
                    .Help("Engine-reported cached prompt tokens / prompt tokens, per session turn from the second on")
                    .Register(registry)),
      moves_measured_(prometheus::BuildCounter()
                          .Name("kvgate_session_moves_measured_total")
                          .Help("Session moves whose first token was measured against the previous worker's "
                                "calibrated expected TTFT, by outcome (paid: sooner than staying was expected "
                                "to be; lost: later)")
                          .Register(registry)),
      move_gain_(prometheus::BuildCounter()
                     .Name("kvgate_session_move_gain_seconds_total")
                     .Help("Sum of the measured moves' gains (paid) and losses (lost) in seconds of time to first "
                           "token against staying on the previous worker, by outcome")
                     .Register(registry)),
      slot_holds_(prometheus::BuildCounter()
                      .Name("kvgate_slot_holds_total")
                      .Help("Slot engines' slots kept idle for a session's next turn (admission.hold_slots), by "
                            "outcome (kept: a hold began; used: the turn came while its slot was kept)")
                      .Register(registry)),
      active_(prometheus::BuildGauge()
                  .Name("kvgate_sessions_active")
                  .Help("Sessions seen within sessions.idle_ttl")
                  .Register(registry)
                  .Add({})) {}

void SessionStats::declare_model(std::string_view model) {
  const std::string name(model);
  for (auto reason : policy::kSessionMoves) {
    moves_.Add({{"model", name}, {"reason", std::string(policy::to_string(reason))}});
    move_prefill_.Add({{"model", name}, {"reason", std::string(policy::to_string(reason))}});
  }
  turn_hit_.Add({{"model", name}}, obs::ratio_buckets());
  for (const char* outcome : {"paid", "lost"}) {
    moves_measured_.Add({{"model", name}, {"outcome", outcome}});
    move_gain_.Add({{"model", name}, {"outcome", outcome}});
  }
  for (const char* outcome : {"kept", "used"}) {
    slot_holds_.Add({{"model", name}, {"outcome", outcome}});
  }
}

void SessionStats::slot_hold(std::string_view model, HoldOutcome outcome) {
  slot_holds_.Add({{"model", std::string(model)}, {"outcome", outcome == HoldOutcome::kept ? "kept" : "used"}})
      .Increment();
}

void SessionStats::move_measured(std::string_view model, double gain_ms) {
  const std::string name(model);
  const char* outcome = gain_ms > 0 ? "paid" : "lost";
  moves_measured_.Add({{"model", name}, {"outcome", outcome}}).Increment();
  move_gain_.Add({{"model", name}, {"outcome", outcome}}).Increment(std::abs(gain_ms) / 1000.0);
}

void SessionStats::moved(std::string_view model, policy::Reason reason, std::uint32_t added_prefill_tokens) {
  const std::map<std::string, std::string> labels{{"model", std::string(model)},
                                                  {"reason", std::string(policy::to_string(reason))}};
  moves_.Add(labels).Increment();
  move_prefill_.Add(labels).Increment(static_cast<double>(added_prefill_tokens));
}

void SessionStats::turn_hit(std::string_view model, double ratio) {
  turn_hit_.Add({{"model", std::string(model)}}, obs::ratio_buckets()).Observe(ratio);
}

}  // namespace kvgate::route
