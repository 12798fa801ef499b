// Arbitrary bytes as what a data plane sends the endpoint picker: first as
// one serialized ProcessingRequest (its headers, metadata hints, response
// status), then as a request body arriving in pieces (split at 0xff bytes)
// that is assembled under a limit and inspected as a chat request. Nothing
// crashes; a refused body is a 4xx with a message; a body over the limit
// is never half kept.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "kvgate/openai/request.hpp"
#include "kvgate/picker/ext_proc_messages.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace kvgate;
  picker::ext_proc::ProcessingRequest request;
  if (request.ParseFromArray(data, static_cast<int>(size))) {
    if (request.has_request_headers()) {
      auto head = picker::read_request_head(request.request_headers(), 100, 64 * 1024);
      if (head) {
        (void)head->path();
        (void)head->get("x-session-id");
      } else if (head.error().status != 431) {
        __builtin_trap();
      }
    }
    (void)picker::read_subset_hint(request.metadata_context());
    (void)picker::served_endpoint(request);
    if (request.has_response_headers()) {
      const int status = picker::response_status(request.response_headers());
      if (status != 0 && (status < 100 || status > 999)) {
        __builtin_trap();
      }
      (void)picker::response_media_type(request.response_headers());
    }
  }
  constexpr std::size_t kLimit = 4096;
  picker::BodyAssembly body(kLimit);
  std::string_view rest(reinterpret_cast<const char*>(data), size);
  for (;;) {
    const auto cut = rest.find('\xff');
    const bool last = cut == std::string_view::npos;
    const auto step = body.append(rest.substr(0, cut), last);
    if (step == picker::BodyAssembly::Step::too_large) {
      if (!body.body().empty() || size <= kLimit) {
        __builtin_trap();
      }
      return 0;
    }
    if (step == picker::BodyAssembly::Step::complete) {
      auto summary = openai::inspect_request(body.body(), openai::Endpoint::chat_completions, {});
      if (!summary &&
          (summary.error().status < 400 || summary.error().status > 499 || summary.error().message.empty())) {
        __builtin_trap();
      }
      return 0;
    }
    rest.remove_prefix(cut + 1);
  }
}
