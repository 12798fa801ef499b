#pragma once
// What one ms of prefill costs the fleet, in ms of requests' time to first
// token (cache_aware's price of work). A placement's queue is the request's
// own wait: it moves time between requests and adds no work. Its prefill
// (and the re-prefill of what it evicts) is work the fleet must do, and a
// work-conserving worker that does w ms more starts each request behind it
// w ms later. How many that is: at a fleet kept balanced, the requests
// waiting for their first token on a worker (Little's law: the arrivals
// while one wait lasts; an M/M/1 queue holds rho / (1 - rho) of them, the
// number of requests a unit of work added at random delays). So each ms of
// work costs itself plus the fleet's mean count of requests waiting per
// worker. On an idle fleet the price is 1 (the request's own TTFT); near
// saturation it grows, so a turn leaves the worker holding its
// conversation only when that worker's queue costs more than the whole
// fleet's extra work, and a placement's evictions weigh as much as its
// own prefill. Every candidate is priced at the same fleet mean, so only
// the work differs (a worker's own count would make an idle worker's work
// look free). Pure.
#include <cstddef>

namespace kvgate::policy {

// 1 + waiting_requests / workers, where waiting_requests counts the
// requests without a first token on the eligible workers; 1 without
// workers. Finite for any count the router holds.
[[nodiscard]] double fleet_work_price(double waiting_requests, std::size_t workers);

}  // namespace kvgate::policy
