#pragma once
// What the tests ask the gateway's admin port while it runs: one worker's
// /debug/workers entry, and waiting for state that changes on the daemon's
// own schedule.
#include <chrono>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

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
// A JSON-lines file (the decision log), one value per line, as far as it
// has been written.
inline std::vector<nlohmann::json> read_json_lines(const std::string& path) {
  std::vector<nlohmann::json> lines;
  std::ifstream file(path);
  for (std::string line; std::getline(file, line);) {
    lines.push_back(nlohmann::json::parse(line));
  }
  return lines;
}

inline nlohmann::json worker_state(Harness& harness, const std::string& id) {
  const auto workers = nlohmann::json::parse(get(harness.admin_port(), "/debug/workers").body);
  for (const auto& worker : workers["workers"]) {
    if (worker["id"] == id) {
      return worker;
    }
  }
  return nullptr;
}

// A series' value in the gateway's /metrics exposition, e.g.
// `kvgate_admission_queue_length` or `name{label="x"}` with the labels in
// exposition order; 0 when the series is absent.
inline double metric_value(Harness& harness, const std::string& series) {
  const auto text = get(harness.admin_port(), "/metrics").body;
  for (std::size_t at = text.find(series + " "); at != std::string::npos; at = text.find(series + " ", at + 1)) {
    if (at == 0 || text[at - 1] == '\n') {
      return std::stod(text.substr(at + series.size() + 1));
    }
  }
  return 0;
}

}  // namespace kvgate::testing
