#pragma once
// What a placement's prefill costs the requests that come after it
// (routing.cache_aware.congestion_cost). Prompts are computed one after
// another (FCFS chunked prefill is work-conserving), and a router that
// balances its fleet spreads every queue over it: w ms of prefill placed
// on any worker starts the requests that reach the fleet before the
// backlog drains w ms later. With a worker's backlog b (queue delay), the
// rate lambda at which requests reach it and its prefill utilisation u,
// the backlog plus w drains at the spare rate 1 - u, and the requests
// arriving meanwhile each wait up to w longer (the ones arriving while w
// itself runs, half of it on average):
//   congestion = w * lambda * (b + w / 2) / (1 - u)
// (the busy-period arithmetic of an M/G/1 queue). It is small on an idle
// fleet and grows with load and with the square of w: near saturation, a
// turn that would leave the worker holding its conversation to compute the
// whole history elsewhere pays for the queue that work builds, which the
// request's own expected TTFT leaves out. cache_aware prices every worker
// at the fleet's means of b, lambda and u, so that only the work differs:
// priced at each worker's own traffic, an idle worker's work looks free
// and turns leave the workers holding their conversations for it. Pure.

namespace kvgate::policy {

// Traffic as this gateway sent it (0: not known yet).
struct WorkerTraffic {
  double arrivals_per_ms = 0;  // requests dispatched per ms
  double utilisation = 0;      // priced prefill ms dispatched per ms
};

// A saturated fleet (u >= 1) drains only as arrivals fall off; its spare
// rate is taken as at least this, which keeps the price finite (at most 20x
// the drain time of an idle one).
inline constexpr double kMinSpareRate = 0.05;

// In ms of other requests' waiting; 0 for no work or no known traffic.
[[nodiscard]] double congestion_ms(double work_ms, double backlog_ms, const WorkerTraffic& traffic);

}  // namespace kvgate::policy
