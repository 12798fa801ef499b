#pragma once
// A decision's candidates as JSON, one object per worker in configuration
// order: the same array in the decision log and in POST /debug/route.
#include <nlohmann/json.hpp>
#include <vector>

#include "kvgate/policy/policy.hpp"

namespace kvgate::route {

nlohmann::json candidates_json(const std::vector<policy::Candidate>& candidates);

}  // namespace kvgate::route
