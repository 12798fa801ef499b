#include "kvgate/route/session_stats.hpp"

#include <prometheus/counter.h>

#include <string>

#include "kvgate/obs/exposition.hpp"

namespace kvgate::route {

SessionStats::SessionStats(prometheus::Registry& registry)
    : moves_(prometheus::BuildCounter()
                 .Name("kvgate_session_moves_total")
                 .Help("Session turns routed away from the session's previous worker, by reason (moved_queue, "
                       "moved_evicted, moved_unhealthy, moved_better_prefix)")
                 .Register(registry)),
      turn_hit_(prometheus::BuildHistogram()
                    .Name("kvgate_session_turn_hit_ratio")
                    .Help("Engine-reported cached prompt tokens / prompt tokens, per session turn from the second on")
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
  }
  turn_hit_.Add({{"model", name}}, obs::ratio_buckets());
}

void SessionStats::moved(std::string_view model, policy::Reason reason) {
  moves_.Add({{"model", std::string(model)}, {"reason", std::string(policy::to_string(reason))}}).Increment();
}

void SessionStats::turn_hit(std::string_view model, double ratio) {
  turn_hit_.Add({{"model", std::string(model)}}, obs::ratio_buckets()).Observe(ratio);
}

}  // namespace kvgate::route
