#pragma once
// What the tests ask the gateway's admin port while it runs: one worker's
// /debug/workers entry, and waiting for state that changes on the daemon's
// own schedule.
#include <chrono>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>

#include "harness.hpp"

namespace kvgate::testing {

// Repeats `probe` (each call may be a real request) every 20 ms until it
// returns true or the deadline passes.
template <class Probe>
bool eventually(Probe probe, std::chrono::milliseconds limit = std::chrono::seconds(10)) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < deadline) {
    if (probe()) {
      return true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return false;
}

// The worker's entry in GET /debug/workers (null when there is none).
inline nlohmann::json worker_state(Harness& harness, const std::string& id) {
  const auto workers = nlohmann::json::parse(get(harness.admin_port(), "/debug/workers").body);
  for (const auto& worker : workers["workers"]) {
    if (worker["id"] == id) {
      return worker;
    }
  }
  return nullptr;
}

}  // namespace kvgate::testing
