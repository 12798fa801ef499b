#include "kvgate/gateway/context.hpp"

namespace kvgate::gateway {

bool GatewayContext::try_open_connection(std::uint32_t limit) {
  auto current = open_connections_.load(std::memory_order_relaxed);
  do {
    if (current >= limit) {
      return false;
    }
  } while (!open_connections_.compare_exchange_weak(current, current + 1, std::memory_order_relaxed));
  return true;
}

void GatewayContext::close_connection() {
  auto remaining = open_connections_.fetch_sub(1, std::memory_order_acq_rel) - 1;
  if (remaining == 0 && draining() && on_drained_) {
    on_drained_();
  }
}

}  // namespace kvgate::gateway
