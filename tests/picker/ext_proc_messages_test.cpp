#include "kvgate/picker/ext_proc_messages.hpp"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace kvgate::picker {
namespace {

ext_proc::HttpHeaders headers(std::initializer_list<std::pair<std::string, std::string>> list, bool raw = true) {
  ext_proc::HttpHeaders out;
  for (const auto& [name, value] : list) {
    auto* header = out.mutable_headers()->add_headers();
    header->set_key(name);
    if (raw) {
      header->set_raw_value(value);
    } else {
      header->set_value(value);
    }
  }
  return out;
}

TEST(RequestHead, ReadsRawValuesAndOlderPlainValuesCaseInsensitively) {
  for (bool raw : {true, false}) {
    auto head = read_request_head(
        headers({{":method", "POST"}, {":path", "/v1/chat/completions?x=1"}, {"x-session-id", "abc"}}, raw), 100,
        65536);
    ASSERT_TRUE(head);
    EXPECT_EQ(head->method(), "POST");
    EXPECT_EQ(head->path(), "/v1/chat/completions");
    EXPECT_EQ(head->get("X-Session-Id"), "abc");
    EXPECT_EQ(head->get("absent"), "");
    EXPECT_FALSE(head->end_of_stream());
  }
}

TEST(RequestHead, TooManyOrTooLargeHeadersAre431) {
  auto many = read_request_head(headers({{"a", "1"}, {"b", "2"}, {"c", "3"}}), 2, 65536);
  ASSERT_FALSE(many);
  EXPECT_EQ(many.error().status, 431);
  EXPECT_EQ(many.error().code, "too_many_headers");
  auto large = read_request_head(headers({{"a", std::string(100, 'x')}}), 10, 50);
  ASSERT_FALSE(large);
  EXPECT_EQ(large.error().code, "headers_too_large");
}

TEST(SubsetHint, AbsentListOrMalformed) {
  envoy_core::Metadata metadata;
  auto absent = read_subset_hint(metadata);
  ASSERT_TRUE(absent);
  EXPECT_FALSE(absent->has_value());
  auto& fields = *(*metadata.mutable_filter_metadata())[std::string(kSubsetNamespace)].mutable_fields();
  auto* list = fields[std::string(kSubsetKey)].mutable_list_value();
  list->add_values()->set_string_value("10.0.0.1:8000");
  list->add_values()->set_string_value("10.0.0.2:8000");
  auto two = read_subset_hint(metadata);
  ASSERT_TRUE(two && two->has_value());
  EXPECT_EQ(**two, (std::vector<std::string>{"10.0.0.1:8000", "10.0.0.2:8000"}));
  list->add_values()->set_number_value(3);
  EXPECT_FALSE(read_subset_hint(metadata));
  fields[std::string(kSubsetKey)].set_string_value("10.0.0.1:8000");
  EXPECT_FALSE(read_subset_hint(metadata));
}

TEST(BodyAssembly, CompletesAtTheEndAndStaysRefusedOnceOverTheLimit) {
  BodyAssembly body(10);
  EXPECT_EQ(body.append("abcd", false), BodyAssembly::Step::more);
  EXPECT_EQ(body.append("efgh", true), BodyAssembly::Step::complete);
  EXPECT_EQ(body.body(), "abcdefgh");
  BodyAssembly over(10);
  EXPECT_EQ(over.append("abcdefgh", false), BodyAssembly::Step::more);
  EXPECT_EQ(over.append("ijk", false), BodyAssembly::Step::too_large);
  EXPECT_EQ(over.append("", true), BodyAssembly::Step::too_large);
  EXPECT_TRUE(over.body().empty());  // nothing kept of a refused body
}

TEST(PickAnswer, HeaderAndMetadataAgreeAndTheRouteCacheIsCleared) {
  auto answer = pick_answer({{"10.0.0.1:8000", "10.0.0.2:8000"}, {{"x-request-id", "r1"}}, {"authorization"}});
  ASSERT_TRUE(answer.has_request_headers());
  const auto& common = answer.request_headers().response();
  EXPECT_TRUE(common.clear_route_cache());
  ASSERT_EQ(common.header_mutation().set_headers_size(), 2);
  EXPECT_EQ(common.header_mutation().set_headers(0).header().key(), kDestinationHeader);
  // One address: Envoy's ORIGINAL_DST cluster refuses a list there.
  EXPECT_EQ(common.header_mutation().set_headers(0).header().raw_value(), "10.0.0.1:8000");
  EXPECT_EQ(common.header_mutation().set_headers(0).append_action(),
            envoy_core::HeaderValueOption::OVERWRITE_IF_EXISTS_OR_ADD);
  EXPECT_EQ(common.header_mutation().remove_headers(0), "authorization");
  const auto& lb = answer.dynamic_metadata().fields().at(std::string(kDestinationNamespace));
  EXPECT_EQ(lb.struct_value().fields().at(std::string(kDestinationHeader)).string_value(),
            "10.0.0.1:8000,10.0.0.2:8000");
  EXPECT_EQ(lb.struct_value().fields().at(std::string(kFallbackKey)).string_value(), "10.0.0.2:8000");
  auto single = pick_answer({{"10.0.0.1:8000"}, {}, {}});
  EXPECT_EQ(single.dynamic_metadata()
                .fields()
                .at(std::string(kDestinationNamespace))
                .struct_value()
                .fields()
                .count(std::string(kFallbackKey)),
            0u);
}

TEST(RequestBody, ComesBackInBoundedPiecesTheLastMarked) {
  std::vector<ext_proc::ProcessingResponse> out;
  const std::string body(kBodyChunkBytes * 2 + 10, 'b');
  append_request_body(body, out);
  ASSERT_EQ(out.size(), 3u);
  std::string joined;
  for (std::size_t at = 0; at < out.size(); ++at) {
    const auto& streamed = out[at].request_body().response().body_mutation().streamed_response();
    EXPECT_LE(streamed.body().size(), kBodyChunkBytes);
    EXPECT_EQ(streamed.end_of_stream(), at + 1 == out.size());
    joined += streamed.body();
  }
  EXPECT_EQ(joined, body);
}

TEST(ImmediateAnswer, IsOpenAIsErrorShapeWithTheStatusAndRetryAfter) {
  auto answer = immediate_answer(openai::rate_limited("slow down", false, 1500));
  ASSERT_TRUE(answer.has_immediate_response());
  const auto& immediate = answer.immediate_response();
  EXPECT_EQ(static_cast<int>(immediate.status().code()), 429);
  auto body = nlohmann::json::parse(immediate.body());
  EXPECT_EQ(body["error"]["message"], "slow down");
  bool retry_after = false;
  for (const auto& option : immediate.headers().set_headers()) {
    retry_after |= option.header().key() == "retry-after" && option.header().raw_value() == "2";
  }
  EXPECT_TRUE(retry_after);
}

TEST(Response, StatusMediaTypeAndTheServedEndpoint) {
  auto response = headers({{":status", "200"}, {"content-type", "Text/Event-Stream; charset=utf-8"}});
  EXPECT_EQ(response_status(response), 200);
  EXPECT_EQ(response_media_type(response), "text/event-stream");
  EXPECT_EQ(response_status(headers({{":status", "2x0"}})), 0);
  EXPECT_EQ(response_status(headers({})), 0);
  ext_proc::ProcessingRequest request;
  *request.mutable_response_headers() = headers({{":status", "200"}, {std::string(kServedKey), "10.0.0.2:8000"}});
  EXPECT_EQ(served_endpoint(request), "10.0.0.2:8000");
  ext_proc::ProcessingRequest by_metadata;
  auto& lb = (*by_metadata.mutable_metadata_context()->mutable_filter_metadata())[std::string(kDestinationNamespace)];
  (*lb.mutable_fields())[std::string(kServedKey)].set_string_value("10.0.0.3:8000");
  EXPECT_EQ(served_endpoint(by_metadata), "10.0.0.3:8000");
}

}  // namespace
}  // namespace kvgate::picker
