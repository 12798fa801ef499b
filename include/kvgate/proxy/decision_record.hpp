#pragma once
// One decision-log line (JSON) for a finished exchange, in the contract's
// vocabulary. Fields that later capabilities fill (token counts, predicted
// and engine-reported cached tokens) are null until then.
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "kvgate/proxy/exchange.hpp"

namespace kvgate::proxy {

std::string decision_record(const Exchange& exchange, double unix_seconds);

}  // namespace kvgate::proxy
