#pragma once
// Envoy's external processing messages as the endpoint picker reads and
// writes them: protobuf values in, values out (no gRPC, no router, no
// clock). The protocol is the Gateway API Inference Extension's endpoint
// picker protocol over envoy.service.ext_proc.v3 with
// FULL_DUPLEX_STREAMED bodies: the data plane streams the request body to
// the picker, and the picker streams it back (possibly rewritten) after its
// answer to the request headers, which carries the pick.
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "envoy/service/ext_proc/v3/external_processor.pb.h"
#include "kvgate/core/result.hpp"
#include "kvgate/openai/errors.hpp"

namespace kvgate::picker {

namespace ext_proc = envoy::service::ext_proc::v3;
namespace envoy_core = envoy::config::core::v3;

// The endpoint picker protocol's names (gateway-api-inference-extension,
// docs/proposals/004-endpoint-picker-protocol).
inline constexpr std::string_view kDestinationHeader = "x-gateway-destination-endpoint";
inline constexpr std::string_view kDestinationNamespace = "envoy.lb";
inline constexpr std::string_view kSubsetNamespace = "envoy.lb.subset_hint";
inline constexpr std::string_view kSubsetKey = "x-gateway-destination-endpoint-subset";
inline constexpr std::string_view kServedKey = "x-gateway-destination-endpoint-served";
inline constexpr std::string_view kFallbackKey = "x-gateway-destination-endpoint-fallback";

// The largest body piece the picker sends back in one message: below
// Envoy's and gRPC's default message limits with room for the framing.
inline constexpr std::size_t kBodyChunkBytes = std::size_t{62} * 1024;

// A header list as the data plane sent it (Envoy lower-cases names; the
// value is in raw_value, or in value from older data planes).
class RequestHead {
 public:
  // The first value of `name` (compared case-insensitively); empty when absent.
  [[nodiscard]] std::string_view get(std::string_view name) const;
  [[nodiscard]] std::string_view method() const { return get(":method"); }
  // The path without its query string.
  [[nodiscard]] std::string_view path() const;
  [[nodiscard]] bool end_of_stream() const { return end_of_stream_; }
  [[nodiscard]] const std::vector<std::pair<std::string, std::string>>& headers() const { return headers_; }

 private:
  friend Result<RequestHead, openai::ApiError> read_request_head(const ext_proc::HttpHeaders&, std::size_t,
                                                                 std::size_t);
  std::vector<std::pair<std::string, std::string>> headers_;
  bool end_of_stream_ = false;
};

// Errors: 431 when the list has more than `max_fields` entries or
// `max_bytes` of names and values (limits.max_header_fields and
// max_header_size, as the proxy bounds them).
Result<RequestHead, openai::ApiError> read_request_head(const ext_proc::HttpHeaders& headers, std::size_t max_fields,
                                                        std::size_t max_bytes);

// The subset of endpoints the data plane allows (metadata
// envoy.lb.subset_hint / x-gateway-destination-endpoint-subset: a list of
// "ip:port" strings). nullopt: no hint (every endpoint of the pool); an
// error when the hint is not a list of strings.
Result<std::optional<std::vector<std::string>>, std::string> read_subset_hint(const envoy_core::Metadata& metadata);

// The endpoint the data plane reports having sent the request to, from the
// response's headers or its metadata; empty when it did not say.
std::string_view served_endpoint(const ext_proc::ProcessingRequest& request);

// The response's :status; 0 when absent or not a number.
int response_status(const ext_proc::HttpHeaders& headers);
// The response's media type (content-type without parameters, lower case).
std::string response_media_type(const ext_proc::HttpHeaders& headers);

// A request body as its pieces arrive, bounded at `limit` bytes.
class BodyAssembly {
 public:
  enum class Step { more, complete, too_large };
  explicit BodyAssembly(std::size_t limit) : limit_(limit) {}
  // Once too_large, every later piece is too_large too.
  Step append(std::string_view piece, bool end_of_stream);
  [[nodiscard]] std::string& body() { return body_; }

 private:
  std::size_t limit_;
  std::string body_;
  bool over_ = false;
};

// The pick: where the data plane sends the request (the first endpoint,
// then the fallbacks in order), and what else changes in its headers.
struct PickAnswer {
  std::vector<std::string> endpoints;  // "ip:port", at least one
  std::vector<std::pair<std::string, std::string>> set_headers;
  std::vector<std::string> remove_headers;
};

// The answer to the request headers that carries the pick: the
// destination header (the pick alone, as the protocol and Envoy's
// ORIGINAL_DST cluster want it), every endpoint comma-separated (the pick
// first) in the dynamic metadata envoy.lb (with the first fallback also under
// x-gateway-destination-endpoint-fallback), the other header changes, and
// the route cache cleared (the destination changes the route's upstream).
ext_proc::ProcessingResponse pick_answer(const PickAnswer& pick);
// The request body back to the data plane (FULL_DUPLEX_STREAMED): pieces of
// at most kBodyChunkBytes, the last one marked end_of_stream.
void append_request_body(std::string_view body, std::vector<ext_proc::ProcessingResponse>& out);
// A response body piece back to the client (possibly changed).
ext_proc::ProcessingResponse response_body_answer(std::string_view body, bool end_of_stream);
// The answer to the response headers, with headers to add.
ext_proc::ProcessingResponse response_headers_answer(const std::vector<std::pair<std::string, std::string>>& add);
// The answer to request or response trailers: unchanged.
ext_proc::ProcessingResponse trailers_answer(bool request_trailers);
// A local reply in OpenAI's error shape (status, JSON body, Retry-After
// when the error carries one): the data plane answers the client and sends
// nothing upstream.
ext_proc::ProcessingResponse immediate_answer(const openai::ApiError& error);

}  // namespace kvgate::picker
