#pragma once
// A decision explained to people: its candidates as JSON (the same array in
// the decision log and in POST /debug/route), and as a few lines of text
// (POST /debug/route?format=text: which worker, why, the runner-up and the
// gap, then one line per candidate).
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "kvgate/policy/policy.hpp"
#include "kvgate/route/router.hpp"

namespace kvgate::route {

nlohmann::json candidates_json(const std::vector<policy::Candidate>& candidates);
// A disaggregated decision's prefill: where it runs and why, the decoder's
// own expected prefill and every prefill worker's expected hand-over; null
// for a model without roles.
nlohmann::json prefill_json(const RouteDecision& decision);

// No session key or other client text is quoted: worker ids come from the
// configuration.
std::string explain_text(const ModelRoute& model, const RouteDecision& decision);

}  // namespace kvgate::route
