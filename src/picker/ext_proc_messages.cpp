#include "kvgate/picker/ext_proc_messages.hpp"

#include <algorithm>
#include <charconv>

#include "kvgate/core/ascii.hpp"

namespace kvgate::picker {

namespace {

std::string_view header_value(const envoy_core::HeaderValue& header) {
  return header.raw_value().empty() ? std::string_view(header.value()) : std::string_view(header.raw_value());
}

std::string_view find_header(const envoy_core::HeaderMap& map, std::string_view name) {
  for (const auto& header : map.headers()) {
    if (equal_ignoring_ascii_case(header.key(), name)) {
      return header_value(header);
    }
  }
  return {};
}

void set_header(ext_proc::HeaderMutation& mutation, std::string_view name, std::string_view value) {
  auto* option = mutation.add_set_headers();
  option->mutable_header()->set_key(std::string(name));
  // raw_value: what current data planes read (value is the older field).
  option->mutable_header()->set_raw_value(std::string(value));
  option->set_append_action(envoy_core::HeaderValueOption::OVERWRITE_IF_EXISTS_OR_ADD);
}

}  // namespace

std::string_view RequestHead::get(std::string_view name) const {
  for (const auto& [key, value] : headers_) {
    if (equal_ignoring_ascii_case(key, name)) {
      return value;
    }
  }
  return {};
}

std::string_view RequestHead::path() const {
  auto path = get(":path");
  return path.substr(0, path.find('?'));
}

Result<RequestHead, openai::ApiError> read_request_head(const ext_proc::HttpHeaders& headers, std::size_t max_fields,
                                                        std::size_t max_bytes) {
  const auto& list = headers.headers().headers();
  std::size_t bytes = 0;
  for (const auto& header : list) {
    bytes += header.key().size() + header_value(header).size();
  }
  if (static_cast<std::size_t>(list.size()) > max_fields || bytes > max_bytes) {
    const bool too_many = static_cast<std::size_t>(list.size()) > max_fields;
    auto error = openai::invalid_request(
        too_many ? "The request has too many header fields." : "The request headers are too large.", {},
        too_many ? "too_many_headers" : "headers_too_large");
    error.status = 431;
    return unexpected(std::move(error));
  }
  RequestHead head;
  head.headers_.reserve(static_cast<std::size_t>(list.size()));
  for (const auto& header : list) {
    head.headers_.emplace_back(header.key(), header_value(header));
  }
  head.end_of_stream_ = headers.end_of_stream();
  return head;
}

Result<std::optional<std::vector<std::string>>, std::string> read_subset_hint(const envoy_core::Metadata& metadata) {
  const auto& namespaces = metadata.filter_metadata();
  auto hint = namespaces.find(std::string(kSubsetNamespace));
  if (hint == namespaces.end()) {
    return std::optional<std::vector<std::string>>{};
  }
  const auto& fields = hint->second.fields();
  auto subset = fields.find(std::string(kSubsetKey));
  if (subset == fields.end()) {
    return std::optional<std::vector<std::string>>{};
  }
  if (!subset->second.has_list_value()) {
    return unexpected(std::string("the endpoint subset hint is not a list"));
  }
  std::vector<std::string> endpoints;
  for (const auto& value : subset->second.list_value().values()) {
    if (!value.has_string_value()) {
      return unexpected(std::string("the endpoint subset hint holds something other than addresses"));
    }
    endpoints.push_back(value.string_value());
  }
  return std::optional<std::vector<std::string>>(std::move(endpoints));
}

std::string_view served_endpoint(const ext_proc::ProcessingRequest& request) {
  if (request.has_response_headers()) {
    auto served = find_header(request.response_headers().headers(), kServedKey);
    if (!served.empty()) {
      return served;
    }
  }
  const auto& namespaces = request.metadata_context().filter_metadata();
  auto lb = namespaces.find(std::string(kDestinationNamespace));
  if (lb == namespaces.end()) {
    return {};
  }
  auto served = lb->second.fields().find(std::string(kServedKey));
  if (served == lb->second.fields().end() || !served->second.has_string_value()) {
    return {};
  }
  return served->second.string_value();
}

int response_status(const ext_proc::HttpHeaders& headers) {
  auto text = find_header(headers.headers(), ":status");
  int status = 0;
  auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), status);
  if (error != std::errc() || end != text.data() + text.size() || status < 100 || status > 999) {
    return 0;
  }
  return status;
}

std::string response_media_type(const ext_proc::HttpHeaders& headers) {
  return media_type_of(find_header(headers.headers(), "content-type"));
}

BodyAssembly::Step BodyAssembly::append(std::string_view piece, bool end_of_stream) {
  if (over_ || piece.size() > limit_ - body_.size()) {
    over_ = true;
    body_.clear();
    return Step::too_large;
  }
  body_.append(piece);
  return end_of_stream ? Step::complete : Step::more;
}

ext_proc::ProcessingResponse pick_answer(const PickAnswer& pick) {
  std::string destination;
  for (const auto& endpoint : pick.endpoints) {
    if (!destination.empty()) {
      destination += ',';
    }
    destination += endpoint;
  }
  ext_proc::ProcessingResponse answer;
  auto* common = answer.mutable_request_headers()->mutable_response();
  common->set_clear_route_cache(true);
  auto* mutation = common->mutable_header_mutation();
  // The header names the pick alone (the protocol's <ip:port>): Envoy's
  // ORIGINAL_DST cluster parses it as one address and refuses a list. The
  // fallbacks travel in the metadata, for data planes that read a list.
  set_header(*mutation, kDestinationHeader, pick.endpoints.empty() ? std::string() : pick.endpoints.front());
  for (const auto& [name, value] : pick.set_headers) {
    set_header(*mutation, name, value);
  }
  for (const auto& name : pick.remove_headers) {
    mutation->add_remove_headers(name);
  }
  auto& lb = (*answer.mutable_dynamic_metadata()->mutable_fields())[std::string(kDestinationNamespace)];
  auto& fields = *lb.mutable_struct_value()->mutable_fields();
  fields[std::string(kDestinationHeader)].set_string_value(destination);
  if (pick.endpoints.size() > 1) {
    // The protocol's single-fallback key, for data planes that read it
    // rather than the list.
    fields[std::string(kFallbackKey)].set_string_value(pick.endpoints[1]);
  }
  return answer;
}

void append_request_body(std::string_view body, std::vector<ext_proc::ProcessingResponse>& out) {
  do {
    const auto piece = body.substr(0, kBodyChunkBytes);
    body.remove_prefix(piece.size());
    auto& answer = out.emplace_back();
    auto* streamed =
        answer.mutable_request_body()->mutable_response()->mutable_body_mutation()->mutable_streamed_response();
    streamed->set_body(std::string(piece));
    streamed->set_end_of_stream(body.empty());
  } while (!body.empty());
}

ext_proc::ProcessingResponse response_body_answer(std::string_view body, bool end_of_stream) {
  ext_proc::ProcessingResponse answer;
  auto* streamed =
      answer.mutable_response_body()->mutable_response()->mutable_body_mutation()->mutable_streamed_response();
  streamed->set_body(std::string(body));
  streamed->set_end_of_stream(end_of_stream);
  return answer;
}

ext_proc::ProcessingResponse response_headers_answer(const std::vector<std::pair<std::string, std::string>>& add) {
  ext_proc::ProcessingResponse answer;
  auto* common = answer.mutable_response_headers()->mutable_response();
  for (const auto& [name, value] : add) {
    set_header(*common->mutable_header_mutation(), name, value);
  }
  return answer;
}

ext_proc::ProcessingResponse trailers_answer(bool request_trailers) {
  ext_proc::ProcessingResponse answer;
  if (request_trailers) {
    answer.mutable_request_trailers();
  } else {
    answer.mutable_response_trailers();
  }
  return answer;
}

ext_proc::ProcessingResponse immediate_answer(const openai::ApiError& error) {
  ext_proc::ProcessingResponse answer;
  auto* immediate = answer.mutable_immediate_response();
  immediate->mutable_status()->set_code(static_cast<envoy::type::v3::StatusCode>(error.status));
  set_header(*immediate->mutable_headers(), "content-type", "application/json");
  if (error.retry_after_ms > 0) {
    set_header(*immediate->mutable_headers(), "retry-after",
               std::to_string(std::max<std::uint64_t>(1, (error.retry_after_ms + 999) / 1000)));
  }
  immediate->set_body(openai::error_body(error));
  immediate->set_details("kvgate_" + (error.code.empty() ? error.type : error.code));
  return answer;
}

}  // namespace kvgate::picker
