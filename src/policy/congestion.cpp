#include "kvgate/policy/congestion.hpp"

#include <algorithm>
#include <cmath>

namespace kvgate::policy {

double congestion_ms(double work_ms, double backlog_ms, const WorkerTraffic& traffic) {
  if (!(work_ms > 0) || !(traffic.arrivals_per_ms > 0) || !std::isfinite(work_ms) ||
      !std::isfinite(traffic.arrivals_per_ms)) {
    return 0;
  }
  const double backlog = std::isfinite(backlog_ms) ? std::max(backlog_ms, 0.0) : 0.0;
  const double utilisation = std::isfinite(traffic.utilisation) ? std::max(traffic.utilisation, 0.0) : 0.0;
  const double spare = std::max(1 - utilisation, kMinSpareRate);
  return work_ms * traffic.arrivals_per_ms * (backlog + work_ms / 2) / spare;
}

}  // namespace kvgate::policy
