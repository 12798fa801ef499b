#include "kvgate/policy/work_price.hpp"

#include <cmath>

namespace kvgate::policy {

double fleet_work_price(double waiting_requests, std::size_t workers) {
  if (workers == 0 || !std::isfinite(waiting_requests) || waiting_requests <= 0) {
    return 1;
  }
  return 1 + waiting_requests / static_cast<double>(workers);
}

}  // namespace kvgate::policy
