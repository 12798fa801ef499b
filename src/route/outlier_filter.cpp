#include "kvgate/route/outlier_filter.hpp"

#include <algorithm>

#include "kvgate/workers/outlier_ejection.hpp"

namespace kvgate::route {

void lift_ejections_in_panic(std::span<policy::WorkerView> views) {
  const bool all_out = std::none_of(views.begin(), views.end(),
                                    [](const policy::WorkerView& view) { return view.healthy && !view.ejected; });
  if (all_out) {
    for (auto& view : views) {
      view.ejected = false;
    }
  }
}

bool in_routing(const WorkerRoute& worker, std::uint64_t now_ms) {
  return worker.state->health().healthy() && !worker.state->breaker().ejected(now_ms);
}

std::size_t routable_workers(const ModelRoute& model, std::uint64_t now_ms) {
  std::size_t routable = 0;
  for (const auto& worker : model.workers) {
    routable += in_routing(worker, now_ms) ? 1 : 0;
  }
  return routable == 0 ? model.workers.size() : routable;
}

bool may_eject_another(const ModelRoute& model, std::uint64_t now_ms, std::uint32_t max_ejected_percent) {
  std::size_t ejected = 0;
  for (const auto& worker : model.workers) {
    ejected += worker.state->breaker().ejected(now_ms) ? 1 : 0;
  }
  return workers::ejection_allowed(ejected, model.workers.size(), max_ejected_percent);
}

}  // namespace kvgate::route
