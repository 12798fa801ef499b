#pragma once
// What the gateway knows about one request/response exchange while it runs:
// filled in step by step by the pipeline (parse, route, forward, relay) and
// read at the end for the access log and metrics.
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "kvgate/obs/decision_log.hpp"
#include "kvgate/openai/usage_scan.hpp"
#include "kvgate/policy/policy.hpp"
#include "kvgate/proxy/routing_table.hpp"

namespace kvgate::proxy {

struct Exchange {
  // The configuration this exchange runs under, loaded once when it starts
  // (a reload mid-request does not change it).
  std::shared_ptr<const RoutingTable> table;
  std::string request_id;
  std::string method;
  std::string path;
  std::chrono::steady_clock::time_point started;
  std::string model;
  std::string worker;
  std::string route_reason;
  // Filled when the request went through the policy (decision log).
  bool routed = false;
  std::optional<std::string> session;
  std::string policy;
  std::vector<policy::Candidate> candidates;  // of the first decision
  std::uint32_t input_tokens = 0;             // 0: not tokenised
  // The client streams without asking for usage: kvgate asks for it (to
  // learn the engine's cached tokens) and strips the usage event.
  bool strip_usage_event = false;
  openai::ReportedUsage reported;  // the engine's usage numbers, when it sent them
  std::optional<std::uint32_t> predicted_cached_tokens;
  std::shared_ptr<obs::DecisionLog> decision_log;  // set when routed and the log is on
  int status = 0;
  double first_byte_seconds = -1;   // the response header; < 0: no upstream response
  double first_token_seconds = -1;  // a stream's first body byte; < 0: not a stream, or none yet
  double total_seconds = 0;         // set when the exchange ends
  std::uint32_t retries = 0;
  std::uint64_t response_bytes = 0;
  bool keep_alive = true;    // may the client connection serve another request
  bool client_gone = false;  // the client closed its connection mid-exchange
  std::string error_code;    // kvgate's own error code, when kvgate answered with an error
};

}  // namespace kvgate::proxy
