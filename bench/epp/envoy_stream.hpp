#pragma once
// Envoy's side of one ext_proc stream, as its ext_proc filter with
// FULL_DUPLEX_STREAMED bodies plays it against an endpoint picker: the
// request's headers, its body in pieces, then the upstream's response
// headers and body. Synchronous (one stream per thread). Shared by the
// picker's integration tests and the bench's data plane (dataplane.cpp).
#include <grpcpp/grpcpp.h>

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "envoy/service/ext_proc/v3/external_processor.grpc.pb.h"

namespace kvgate::epp {

namespace ext_proc = envoy::service::ext_proc::v3;
using HeaderList = std::vector<std::pair<std::string, std::string>>;

// What the picker answered for a request.
struct RequestAnswer {
  bool stream_ok = true;  // false: the stream ended (status in `error`)
  std::string error;
  std::optional<ext_proc::ImmediateResponse> immediate;
  std::string destination;           // the x-gateway-destination-endpoint header
  std::string metadata_destination;  // the same in dynamic metadata envoy.lb
  HeaderList set_headers;
  std::vector<std::string> remove_headers;
  bool clear_route_cache = false;
  std::string body;  // the request body as the picker streamed it back
  [[nodiscard]] std::string header(std::string_view name) const {
    for (const auto& [key, value] : set_headers) {
      if (key == name) {
        return value;
      }
    }
    return {};
  }
  // The picked endpoint (the header names it alone).
  [[nodiscard]] std::string endpoint() const { return destination; }
};

inline std::string value_of(const envoy::config::core::v3::HeaderValue& header) {
  return header.raw_value().empty() ? header.value() : header.raw_value();
}

class EnvoyStream {
 public:
  explicit EnvoyStream(ext_proc::ExternalProcessor::Stub& stub,
                       std::chrono::milliseconds deadline = std::chrono::seconds(30)) {
    context_.set_deadline(std::chrono::system_clock::now() + deadline);
    stream_ = stub.Process(&context_);
  }

  // Headers (":method", ":path" and the rest), then the body in `pieces`
  // roughly equal pieces (none when empty). `subset`: the endpoint subset
  // hint. Reads the picker's answers until the pick and the whole body
  // came back, or a local reply.
  RequestAnswer send_request(const HeaderList& headers, std::string_view body, std::size_t pieces = 1,
                             const std::optional<std::vector<std::string>>& subset = std::nullopt,
                             bool end_body = true) {
    ext_proc::ProcessingRequest request;
    auto* protocol = request.mutable_protocol_config();
    protocol->set_request_body_mode(ext_proc::FULL_DUPLEX_STREAMED);
    protocol->set_response_body_mode(ext_proc::FULL_DUPLEX_STREAMED);
    for (const auto& [name, value] : headers) {
      auto* header = request.mutable_request_headers()->mutable_headers()->add_headers();
      header->set_key(name);
      header->set_raw_value(value);
    }
    request.mutable_request_headers()->set_end_of_stream(body.empty() && end_body);
    if (subset) {
      auto& hint = (*request.mutable_metadata_context()->mutable_filter_metadata())["envoy.lb.subset_hint"];
      auto* list = (*hint.mutable_fields())["x-gateway-destination-endpoint-subset"].mutable_list_value();
      for (const auto& endpoint : *subset) {
        list->add_values()->set_string_value(endpoint);
      }
    }
    RequestAnswer answer;
    if (!stream_->Write(request)) {
      return ended(answer);
    }
    if (!body.empty()) {
      const std::size_t size = (body.size() + pieces - 1) / std::max<std::size_t>(pieces, 1);
      for (std::size_t at = 0; at < body.size(); at += size) {
        ext_proc::ProcessingRequest piece;
        piece.mutable_request_body()->set_body(std::string(body.substr(at, size)));
        piece.mutable_request_body()->set_end_of_stream(end_body && at + size >= body.size());
        if (!stream_->Write(piece)) {
          return ended(answer);
        }
      }
    }
    if (!end_body) {
      return answer;  // the caller ends the stream mid-body
    }
    bool picked = false;
    bool body_done = body.empty();
    ext_proc::ProcessingResponse response;
    while (!(picked && body_done)) {
      if (!stream_->Read(&response)) {
        return ended(answer);
      }
      if (response.has_immediate_response()) {
        answer.immediate = response.immediate_response();
        return answer;
      }
      if (response.has_request_headers()) {
        picked = true;
        const auto& common = response.request_headers().response();
        answer.clear_route_cache = common.clear_route_cache();
        for (const auto& option : common.header_mutation().set_headers()) {
          if (option.header().key() == "x-gateway-destination-endpoint") {
            answer.destination = value_of(option.header());
          } else {
            answer.set_headers.emplace_back(option.header().key(), value_of(option.header()));
          }
        }
        for (const auto& name : common.header_mutation().remove_headers()) {
          answer.remove_headers.push_back(name);
        }
        const auto& fields = response.dynamic_metadata().fields();
        if (auto lb = fields.find("envoy.lb"); lb != fields.end()) {
          const auto& inner = lb->second.struct_value().fields();
          if (auto found = inner.find("x-gateway-destination-endpoint"); found != inner.end()) {
            answer.metadata_destination = found->second.string_value();
          }
        }
      } else if (response.has_request_body()) {
        const auto& streamed = response.request_body().response().body_mutation().streamed_response();
        answer.body += streamed.body();
        body_done = streamed.end_of_stream();
      }
    }
    return answer;
  }

  // The upstream's response headers; returns the headers the picker adds.
  std::optional<HeaderList> send_response_headers(int status, std::string_view content_type, bool end_of_stream,
                                                  const HeaderList& more = {}) {
    ext_proc::ProcessingRequest request;
    auto* headers = request.mutable_response_headers();
    auto add = [&](std::string_view name, std::string_view value) {
      auto* header = headers->mutable_headers()->add_headers();
      header->set_key(std::string(name));
      header->set_raw_value(std::string(value));
    };
    add(":status", std::to_string(status));
    add("content-type", content_type);
    for (const auto& [name, value] : more) {
      add(name, value);
    }
    headers->set_end_of_stream(end_of_stream);
    ext_proc::ProcessingResponse response;
    if (!stream_->Write(request) || !stream_->Read(&response) || !response.has_response_headers()) {
      return std::nullopt;
    }
    HeaderList added;
    for (const auto& option : response.response_headers().response().header_mutation().set_headers()) {
      added.emplace_back(option.header().key(), value_of(option.header()));
    }
    return added;
  }

  // One piece of the upstream's response body; returns what the client
  // gets of it (nullopt: the stream failed).
  std::optional<std::string> send_response_body(std::string_view piece, bool end_of_stream) {
    ext_proc::ProcessingRequest request;
    request.mutable_response_body()->set_body(std::string(piece));
    request.mutable_response_body()->set_end_of_stream(end_of_stream);
    ext_proc::ProcessingResponse response;
    if (!stream_->Write(request) || !stream_->Read(&response) || !response.has_response_body()) {
      return std::nullopt;
    }
    return response.response_body().response().body_mutation().streamed_response().body();
  }

  // The data plane is done with the request: half-close, then the status.
  grpc::Status finish() {
    stream_->WritesDone();
    ext_proc::ProcessingResponse ignored;
    while (stream_->Read(&ignored)) {
    }
    return stream_->Finish();
  }
  void cancel() { context_.TryCancel(); }

 private:
  RequestAnswer& ended(RequestAnswer& answer) {
    answer.stream_ok = false;
    stream_->WritesDone();
    auto status = stream_->Finish();
    answer.error = status.error_message();
    return answer;
  }

  grpc::ClientContext context_;
  std::unique_ptr<grpc::ClientReaderWriter<ext_proc::ProcessingRequest, ext_proc::ProcessingResponse>> stream_;
};

}  // namespace kvgate::epp
