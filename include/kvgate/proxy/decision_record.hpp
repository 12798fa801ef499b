#pragma once
// One decision-log line (JSON) for a finished exchange, in the contract's
// vocabulary. Fields that later capabilities fill (token counts, predicted
// and engine-reported cached tokens) are null until then.
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "kvgate/proxy/exchange.hpp"

namespace kvgate::gateway {
class GatewayContext;
}  // namespace kvgate::gateway

namespace kvgate::proxy {

std::string decision_record(const Exchange& exchange, double unix_seconds);

// What every front door does when an exchange ends (exchange.total_seconds
// set): completes its last attempt with the response's outcome (learning,
// drift, the session turn), records it on the status page's activity and
// writes its decision-log line.
void record_outcome(gateway::GatewayContext& context, Exchange& exchange);

}  // namespace kvgate::proxy
