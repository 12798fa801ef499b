#pragma once
// What the gateway knows about one request/response exchange while it runs:
// filled in step by step by the pipeline (parse, route, forward, relay) and
// read at the end for the access log and metrics.
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "kvgate/core/trace_context.hpp"
#include "kvgate/obs/decision_log.hpp"
#include "kvgate/openai/usage_scan.hpp"
#include "kvgate/route/router.hpp"
#include "kvgate/route/routing_table.hpp"

namespace kvgate::proxy {

struct Exchange {
  // The configuration this exchange runs under, loaded once when it starts
  // (a reload mid-request does not change it).
  std::shared_ptr<const route::RoutingTable> table;
  std::string request_id;
  // The client's W3C traceparent, when valid (the header itself goes to the
  // worker unchanged either way).
  std::optional<TraceContext> trace;
  std::string method;
  std::string path;
  std::chrono::steady_clock::time_point started;
  // Who sent it (authenticated, or the anonymous tenant); lives in `table`.
  const tenant::Tenant* tenant = nullptr;
  // Set for a model that isolates tenants: the cache_salt the worker's body
  // gets (forwarder), and whether it replaces a member the client sent
  // rather than being added.
  struct CacheSaltRewrite {
    std::string_view salt;
    bool replaces_member = false;
  };
  std::optional<CacheSaltRewrite> cache_salt_rewrite;
  std::string model;
  std::string worker;
  // A disaggregated request prefilled on another worker: that worker, and
  // when its answer came (seconds since `started`; < 0: none).
  std::string prefill_worker;
  double prefill_answered_seconds = -1;
  // The routing decision of the attempt that got the request (the last
  // one), once the router was asked; its model lives in `table`.
  std::optional<route::RouteDecision> route;
  const route::ModelRoute* route_model = nullptr;
  // The last committed attempt, ended by the forwarder and completed when
  // the exchange finishes (route/attempt.hpp). Declared after `table`,
  // which must outlive it.
  std::optional<route::Attempt> attempt;
  std::optional<std::string> session;  // the session key, when the request had one
  // Where the key came from ("header:x-session-id"); views `table`'s options.
  std::string_view session_source;
  // The client asked for the route receipt (x-kvgate-explain: 1), or the
  // configuration adds it to every response.
  bool explain = false;
  std::string receipt;  // x-kvgate-route, when explain
  // The client streams without asking for usage: kvgate asks for it (to
  // learn the engine's cached tokens) and strips the usage event.
  bool strip_usage_event = false;
  openai::ReportedUsage reported;                  // the engine's usage numbers, when it sent them
  std::shared_ptr<obs::DecisionLog> decision_log;  // set when routed and the log is on
  int status = 0;
  double first_byte_seconds = -1;   // the response header; < 0: no upstream response
  double first_token_seconds = -1;  // a stream's first body byte; < 0: not a stream, or none yet
  // When the last attempt was sent to its worker, after any wait in the
  // admission queue: the router's expectations and what it learns start
  // there (a worker's first token is first_token_seconds less this).
  double dispatched_seconds = 0;
  double total_seconds = 0;  // set when the exchange ends
  std::uint32_t retries = 0;
  std::uint64_t response_bytes = 0;
  bool keep_alive = true;    // may the client connection serve another request
  bool client_gone = false;  // the client closed its connection before the engine's answer was complete
  // The engine's answer is complete: a stream's "data: [DONE]" went to the
  // client, or any body's last byte. A client that closes after that (the
  // openai SDK stops reading at [DONE]) got everything.
  bool engine_done = false;
  std::string error_code;  // kvgate's own error code, when kvgate answered with an error
};

}  // namespace kvgate::proxy
