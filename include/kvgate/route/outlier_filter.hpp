#pragma once
// Ejection as one filter stage of routing (Envoy's outlier detection). The
// breaker that ejects a worker after failed requests is per worker
// (workers/outlier_ejection.hpp); the rules that look at the whole model
// live here, for the router, the attempt and admission alike:
// - panic mode: when no healthy worker is left in routing, ejection is
//   ignored, so a fleet failing as a whole keeps serving what it can;
// - the cap: at most max_ejected_percent of a model's workers are out at
//   once (at least one may go, in a fleet of two or more).
#include <cstddef>
#include <cstdint>
#include <span>

#include "kvgate/policy/policy.hpp"
#include "kvgate/route/routing_table.hpp"

namespace kvgate::route {

// Clears every view's `ejected` when no healthy view is left without it.
void lift_ejections_in_panic(std::span<policy::WorkerView> views);

// Whether the worker is in routing now: healthy and not ejected.
[[nodiscard]] bool in_routing(const WorkerRoute& worker, std::uint64_t now_ms);
// The workers the router may pick now: those in routing, or all of them in
// panic mode (none is).
[[nodiscard]] std::size_t routable_workers(const ModelRoute& model, std::uint64_t now_ms);

// May one more of the model's workers be ejected now?
[[nodiscard]] bool may_eject_another(const ModelRoute& model, std::uint64_t now_ms, std::uint32_t max_ejected_percent);

}  // namespace kvgate::route
