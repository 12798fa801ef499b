#pragma once
// The router's session series: turns that left their session's previous
// worker, by reason; the engine-reported hit ratio of turns 2 and later;
// slot engines' slots kept for sessions' next turns and those used;
// the sessions seen within their idle TTL (set when /metrics is read).
// Written from any I/O thread (prometheus-cpp's series are atomics).
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include <cstddef>
#include <string_view>

#include "kvgate/policy/reason.hpp"

namespace kvgate::route {

class SessionStats {
 public:
  explicit SessionStats(prometheus::Registry& registry);
  // Every move reason at 0, and the hit-ratio histogram, for a model of the
  // configuration. Idempotent.
  void declare_model(std::string_view model);
  // A turn routed away from its previous worker, with the prompt tokens
  // that worker held beyond the chosen one's (the prefill the move added).
  void moved(std::string_view model, policy::Reason reason, std::uint32_t added_prefill_tokens);
  void turn_hit(std::string_view model, double ratio);
  // A measured move: the previous worker's calibrated expected TTFT less
  // the realized one, in ms (positive: the move paid).
  void move_measured(std::string_view model, double gain_ms);
  void set_active(std::size_t sessions) { active_.Set(static_cast<double>(sessions)); }
  // A slot engine's slot kept for a session's next turn
  // (admission.hold_slots), and a turn that came while it was kept.
  enum class HoldOutcome { kept, used };
  void slot_hold(std::string_view model, HoldOutcome outcome);

 private:
  prometheus::Family<prometheus::Counter>& moves_;
  prometheus::Family<prometheus::Counter>& move_prefill_;
  prometheus::Family<prometheus::Histogram>& turn_hit_;
  prometheus::Family<prometheus::Counter>& moves_measured_;
  prometheus::Family<prometheus::Counter>& move_gain_;
  prometheus::Family<prometheus::Counter>& slot_holds_;
  prometheus::Gauge& active_;
};

}  // namespace kvgate::route
