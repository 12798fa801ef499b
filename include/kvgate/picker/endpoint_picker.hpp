#pragma once
// The endpoint picker front door: a gRPC envoy.service.ext_proc.v3
// ExternalProcessor that an Envoy-based gateway (the Gateway API Inference
// Extension's InferencePool) asks where each request goes. One stream per
// HTTP request: the request's headers and body come in, the same
// `route::Router::decide` and `commit` as the proxy's pick the worker, and
// the answer names it (x-gateway-destination-endpoint); the response then
// streams through, so the attempt ends with the engine's status, first
// token and usage exactly as in proxy mode. The gateway sends; kvgate
// decides.
//
// Health: grpc.health.v1 with the services "liveness" (serving while the
// process runs), "readiness" and the ext_proc service's own name (serving
// until draining starts).
//
// Threading: gRPC's callback threads run the streams; each stream's state
// is its own (one mutex, held while a message is handled); shared state is
// what the proxy's I/O threads share (gateway::GatewayContext, the
// admission gate).
#include <array>
#include <cstdint>
#include <memory>
#include <string>

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include "kvgate/core/address.hpp"
#include "kvgate/core/result.hpp"

namespace grpc {
class Server;
}

namespace kvgate::gateway {
class GatewayContext;
}
namespace kvgate::proxy {
class AdmissionGate;
}

namespace kvgate::picker {

// The picker's series (declared once, here): open streams, its answers by
// status and code (200 picked included), the time from the request's last
// body piece to the pick, protocol errors, and responses the data plane
// reports having sent elsewhere than the pick.
class PickerStats {
 public:
  explicit PickerStats(prometheus::Registry& registry);
  void stream_opened() { streams_.Increment(); }
  void stream_closed() { streams_.Decrement(); }
  void answered(int status, std::string_view code);
  void picked(double seconds);
  void protocol_error() { protocol_errors_.Increment(); }
  void served_elsewhere() { served_elsewhere_.Increment(); }
  // A stream that ended before its exchange did (the client left, or the
  // data plane reset it), by how far the exchange had got.
  enum class AbandonedAt : std::uint8_t { request_body, picked, response };
  void abandoned(AbandonedAt at) { abandoned_[static_cast<std::size_t>(at)]->Increment(); }

 private:
  prometheus::Gauge& streams_;
  prometheus::Family<prometheus::Counter>& answers_;
  prometheus::Histogram& pick_seconds_;
  prometheus::Counter& protocol_errors_;
  prometheus::Counter& served_elsewhere_;
  std::array<prometheus::Counter*, 3> abandoned_{};
};

class EndpointPicker {
 public:
  EndpointPicker(gateway::GatewayContext& context, proxy::AdmissionGate& admission);
  ~EndpointPicker();
  EndpointPicker(const EndpointPicker&) = delete;
  EndpointPicker& operator=(const EndpointPicker&) = delete;

  // Start-up: binds `address` and serves; the bound port, or why not.
  Result<int, std::string> start(const HostPort& address);
  // Readiness turns NOT_SERVING; open streams go on.
  void start_draining();
  // Stops serving: streams still open after `grace_ms` are cancelled.
  void shutdown(std::uint64_t grace_ms);

 private:
  class Service;
  gateway::GatewayContext& context_;
  proxy::AdmissionGate& admission_;
  PickerStats stats_;
  std::unique_ptr<Service> service_;
  std::unique_ptr<grpc::Server> server_;
};

}  // namespace kvgate::picker
