// Hostile bytes at the data-plane listener: malformed framing, smuggling
// attempts, bad header bytes, odd targets and methods, JSON that is invalid,
// deep, huge or of the wrong type, and slow or idle clients. Each case has
// its expected status (0: the connection is closed without an answer), must
// not reach the replica when refused, and must leave the gateway serving.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "support/admin.hpp"
#include "support/harness.hpp"

namespace kvgate::testing {
namespace {

using nlohmann::json;
using namespace std::chrono_literals;

// Connects, sends `parts` with `pause` between them, and reads until the
// first response's header block ended, the server closed, or `patience`
// passed. Returns the status (0 when none came).
int first_status(int port, const std::vector<std::string>& parts, std::chrono::milliseconds pause = 0ms,
                 std::chrono::milliseconds patience = 3s, std::string* answer = nullptr) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<std::uint16_t>(port));
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0) {
    close(fd);
    return -1;
  }
  for (std::size_t index = 0; index < parts.size(); ++index) {
    if (index > 0) {
      std::this_thread::sleep_for(pause);
    }
    // MSG_NOSIGNAL: the server may have closed already (that is an answer).
    if (send(fd, parts[index].data(), parts[index].size(), MSG_NOSIGNAL) < 0) {
      break;
    }
  }
  std::string received;
  const auto deadline = std::chrono::steady_clock::now() + patience;
  while (received.find("\r\n\r\n") == std::string::npos) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left <= 0ms) {
      break;
    }
    pollfd ready{fd, POLLIN, 0};
    if (poll(&ready, 1, static_cast<int>(left.count())) <= 0) {
      break;
    }
    char chunk[4096];
    const auto count = recv(fd, chunk, sizeof chunk, 0);
    if (count <= 0) {
      break;
    }
    received.append(chunk, static_cast<std::size_t>(count));
  }
  close(fd);
  if (answer != nullptr) {
    *answer = received;
  }
  if (!received.starts_with("HTTP/1.")) {
    return 0;
  }
  return std::stoi(received.substr(9, 3));
}

std::string request(const std::string& head, const std::string& body) {
  return head + "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
}

const std::string kChat = "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n";

std::string chat(const std::string& body) {
  return request(kChat, body);
}

// A chat body with one field replaced by raw JSON text.
std::string chat_with(const std::string& field, const std::string& value) {
  json body = json::parse(chat_body());
  body.erase(field);
  auto text = body.dump();
  return "{\"" + field + "\":" + value + "," + text.substr(1);
}

std::string nested(const std::string& open, const std::string& close, int depth) {
  std::string text;
  for (int level = 0; level < depth; ++level) {
    text += open;
  }
  text += "\"x\"";
  for (int level = 0; level < depth; ++level) {
    text += close;
  }
  return text;
}

struct Hostile {
  const char* name;
  std::vector<std::string> parts;
  int status;            // expected; 0: closed without an answer
  bool reaches = false;  // the request is valid enough to be forwarded
  std::chrono::milliseconds pause{0};
};

std::vector<Hostile> hostile_cases() {
  const std::string body = chat_body();
  const std::string length = "Content-Length: " + std::to_string(body.size()) + "\r\n";
  const std::string messages = R"([{"role":"user","content":"hi"}])";
  std::string many_headers;
  for (int index = 0; index < 2000; ++index) {
    many_headers += "X-H" + std::to_string(index) + ": v\r\n";
  }
  std::string huge_messages = "[";
  for (int index = 0; index < 50'000; ++index) {
    huge_messages += std::string(index ? "," : "") + R"({"role":"user","content":""})";
  }
  huge_messages += "]";
  return {
      // Framing and request smuggling.
      {"length_and_chunked", {kChat + length + "Transfer-Encoding: chunked\r\n\r\n" + body}, 400},
      {"two_different_lengths", {kChat + length + "Content-Length: 5\r\n\r\n" + body}, 400},
      {"two_equal_lengths", {kChat + length + length + "\r\n" + body}, 400},
      {"negative_length", {kChat + "Content-Length: -1\r\n\r\n"}, 400},
      {"length_not_a_number", {kChat + "Content-Length: 12abc\r\n\r\n"}, 400},
      {"length_overflows", {kChat + "Content-Length: 99999999999999999999999\r\n\r\n"}, 400},
      {"length_beyond_the_body_limit", {kChat + "Content-Length: 17000000\r\n\r\n"}, 413},
      {"chunk_size_not_hex", {kChat + "Transfer-Encoding: chunked\r\n\r\nzz\r\n{}\r\n0\r\n\r\n"}, 400},
      {"chunk_size_overflows",
       {kChat + "Transfer-Encoding: chunked\r\n\r\nfffffffffffffffffffff\r\n{}\r\n0\r\n\r\n"},
       400},
      {"chunk_without_crlf", {kChat + "Transfer-Encoding: chunked\r\n\r\n2\r\n{}XX0\r\n\r\n"}, 400},
      {"transfer_encoding_gzip", {kChat + "Transfer-Encoding: gzip\r\n\r\n" + body}, 400},
      {"chunked_twice", {kChat + "Transfer-Encoding: chunked, chunked\r\n\r\n0\r\n\r\n"}, 400},
      {"chunked_not_last", {kChat + "Transfer-Encoding: chunked, identity\r\n\r\n0\r\n\r\n"}, 400},
      {"chunked_in_http_1_0",
       {"POST /v1/chat/completions HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"},
       400},
      // Header bytes.
      // RFC 9112 5.2 lets a server replace obs-fold by spaces before
      // forwarding, which Beast's parser does: one line reaches the worker.
      {"obsolete_line_folding", {kChat + "X-Folded: a\r\n b\r\n" + length + "\r\n" + body}, 200, true},
      {"cr_in_a_value", {kChat + "X-Bad: a\rb\r\n" + length + "\r\n" + body}, 400},
      {"nul_in_a_value", {kChat + std::string("X-Bad: a\0b\r\n", 12) + length + "\r\n" + body}, 400},
      {"space_in_a_name", {kChat + "X Bad: a\r\n" + length + "\r\n" + body}, 400},
      {"nul_in_a_name", {kChat + std::string("X\0Bad: a\r\n", 10) + length + "\r\n" + body}, 400},
      {"space_before_the_colon", {kChat + "X-Bad : a\r\n" + length + "\r\n" + body}, 400},
      {"line_without_colon", {kChat + "NoColonHere\r\n" + length + "\r\n" + body}, 400},
      {"header_line_of_70_kib",
       {kChat + "X-Big: " + std::string(70 * 1024, 'a') + "\r\n" + length + "\r\n" + body},
       431},
      {"two_thousand_headers", {kChat + many_headers + length + "\r\n" + body}, 431},
      {"bare_lf_line_endings",
       {"POST /v1/chat/completions HTTP/1.1\nHost: x\nContent-Length: " + std::to_string(body.size()) + "\n\n" + body},
       400},
      // Targets.
      {"absolute_form_target",
       {request("POST http://evil.example/v1/chat/completions HTTP/1.1\r\nHost: x\r\n", body)},
       404},
      {"dot_dot_segment", {request("POST /v1/../v1/chat/completions HTTP/1.1\r\nHost: x\r\n", body)}, 400},
      {"encoded_dot_dot_segment", {request("POST /v1/%2e%2e/admin HTTP/1.1\r\nHost: x\r\n", body)}, 400},
      {"dot_dot_in_a_passthrough_path", {"GET /v1/files/../../metrics HTTP/1.1\r\nHost: x\r\n\r\n"}, 400},
      {"encoded_slash", {"GET /v1/files%2f..%2fmetrics HTTP/1.1\r\nHost: x\r\n\r\n"}, 400},
      {"passthrough_reaches_the_worker", {"GET /v1/files HTTP/1.1\r\nHost: x\r\n\r\n"}, 404, true},
      {"asterisk_form", {"OPTIONS * HTTP/1.1\r\nHost: x\r\n\r\n"}, 404},
      {"target_with_nul", {std::string("GET /v1/mo\0dels HTTP/1.1\r\nHost: x\r\n\r\n", 38)}, 400},
      {"request_line_of_100_kib",
       {"GET /v1/models?" + std::string(100 * 1024, 'a') + " HTTP/1.1\r\nHost: x\r\n\r\n"},
       431},
      {"http_2_preface", {"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"}, 400},
      {"http_0_9", {"GET /v1/models\r\n\r\n"}, 400},
      {"unknown_version", {"GET /v1/models HTTP/7.3\r\nHost: x\r\n\r\n"}, 400},
      // Methods.
      {"get_on_chat", {"GET /v1/chat/completions HTTP/1.1\r\nHost: x\r\n\r\n"}, 405},
      {"delete_on_chat", {"DELETE /v1/chat/completions HTTP/1.1\r\nHost: x\r\n\r\n"}, 405},
      {"put_on_completions", {request("PUT /v1/completions HTTP/1.1\r\nHost: x\r\n", body)}, 405},
      {"post_on_models", {request("POST /v1/models HTTP/1.1\r\nHost: x\r\n", "{}")}, 405},
      {"invented_method", {"BREW /v1/chat/completions HTTP/1.1\r\nHost: x\r\n\r\n"}, 405},
      {"connect", {"CONNECT evil.example:443 HTTP/1.1\r\nHost: evil.example:443\r\n\r\n"}, 404},
      {"trace", {"TRACE /v1/chat/completions HTTP/1.1\r\nHost: x\r\n\r\n"}, 405},
      // JSON.
      {"empty_body", {chat("")}, 400},
      {"not_json", {chat("model=m&messages=hi")}, 400},
      {"json_null", {chat("null")}, 400},
      {"json_array", {chat("[]")}, 400},
      {"json_string", {chat("\"chat\"")}, 400},
      {"trailing_garbage", {chat(body + " xyz")}, 400},
      {"comment", {chat("/* hi */" + body)}, 400},
      {"nan_literal", {chat(chat_with("temperature", "NaN"))}, 400},
      {"invalid_utf8",
       {chat("{\"model\":\"test-model\",\"messages\":[{\"role\":\"user\",\"content\":\"\xff\xfe\"}]}")},
       400},
      {"overlong_utf8",
       {chat("{\"model\":\"test-model\",\"messages\":[{\"role\":\"user\",\"content\":\"\xc0\xaf\"}]}")},
       400},
      {"lone_surrogate_escape",
       {chat(R"({"model":"test-model","messages":[{"role":"user","content":"\ud800"}]})")},
       400},
      {"reversed_surrogates",
       {chat(R"({"model":"test-model","messages":[{"role":"user","content":"\udc00\ud800"}]})")},
       400},
      {"content_5000_arrays_deep",
       {chat(chat_with("messages", R"([{"role":"user","content":)" + nested("[", "]", 5000) + "}]"))},
       400},
      {"objects_5000_deep", {chat(chat_with("metadata", nested("{\"a\":", "}", 5000)))}, 400},
      {"huge_number", {chat(chat_with("max_tokens", "1e99999"))}, 400},
      {"model_a_number", {chat(chat_with("model", "7"))}, 400},
      {"model_null", {chat(chat_with("model", "null"))}, 400},
      {"model_an_array", {chat(chat_with("model", "[\"test-model\"]"))}, 400},
      {"model_unknown", {chat(chat_with("model", "\"no-such-model\""))}, 404},
      {"messages_a_string", {chat(chat_with("messages", "\"hi\""))}, 400},
      {"messages_an_object", {chat(chat_with("messages", R"({"role":"user"})"))}, 400},
      {"messages_empty", {chat(chat_with("messages", "[]"))}, 400},
      {"message_a_number", {chat(chat_with("messages", "[1]"))}, 400},
      {"role_a_number", {chat(chat_with("messages", R"([{"role":1,"content":"hi"}])"))}, 400},
      {"stream_a_string", {chat(chat_with("stream", "\"yes\""))}, 400},
      {"stream_options_a_string", {chat(chat_with("stream_options", "\"usage\""))}, 400},
      {"include_usage_a_string", {chat(chat_with("stream_options", R"({"include_usage":"yes"})"))}, 400},
      {"user_a_number", {chat(chat_with("user", "42"))}, 400},
      {"prompt_cache_key_an_object", {chat(chat_with("prompt_cache_key", "{}"))}, 400},
      {"cache_salt_a_number", {chat(chat_with("cache_salt", "1"))}, 400},
      {"prompt_a_number",
       {request("POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n",
                R"({"model":"test-model","prompt":5})")},
       400},
      {"prompt_missing",
       {request("POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n",
                R"({"model":"test-model"})")},
       400},
      {"body_beyond_the_limit",
       {chat(chat_with("messages", R"([{"role":"user","content":")" + std::string(17 * 1024 * 1024, 'a') + "\"}]"))},
       413},
      // Large but valid: served.
      {"fifty_thousand_messages", {chat(chat_with("messages", huge_messages))}, 200, true},
      {"duplicate_keys_last_wins",
       {chat(R"({"model":"no-such-model","model":"test-model","messages":)" + messages + "}")},
       200,
       true},
      {"http_1_0_request", {"POST /v1/chat/completions HTTP/1.0\r\n" + length + "\r\n" + body}, 200, true},
      // Slow and idle clients (timeouts shortened in the config below).
      // Cut off at the deadline (the stream's timer closes the socket):
      // no answer, and no worker ever sees the half request.
      {"slow_headers", {kChat, length, "\r\n" + body}, 0, false, 700ms},
      {"slow_body", {kChat + length + "\r\n" + body.substr(0, 10), body.substr(10)}, 0, false, 1500ms},
      {"idle_connection", {""}, 0},
  };
}

class HostileBytes : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    harness_ = new Harness();
    harness_->start_upstream("u0");
    harness_->start_gateway(
        "routing: {policy: round_robin}\ntimeouts: {header_read: 500ms, body_read: 1s, keep_alive_idle: 1s}\n",
        harness_->models_for_upstreams());
  }
  static void TearDownTestSuite() {
    delete harness_;
    harness_ = nullptr;
  }
  static int upstream_requests() {
    return json::parse(get(harness_->upstream("u0").port, "/control/stats").body)["v1_requests"].get<int>();
  }
  static Harness* harness_;
};

Harness* HostileBytes::harness_ = nullptr;

TEST_F(HostileBytes, EveryCaseGetsItsStatusReachesNoReplicaAndTheGatewayKeepsServing) {
  const auto cases = hostile_cases();
  ASSERT_GE(cases.size(), 60u);
  for (const auto& bad : cases) {
    SCOPED_TRACE(bad.name);
    const int before = upstream_requests();
    std::string answer;
    // A deadline, not a timing: a sanitizer build takes seconds over the
    // largest valid bodies.
    const int status = first_status(harness_->api_port(), bad.parts, bad.pause, 60s, &answer);
    EXPECT_EQ(status, bad.status) << bad.name << ": " << answer.substr(0, 300);
    if (status >= 400) {
      // kvgate's own errors are OpenAI-shaped.
      EXPECT_NE(answer.find("\r\n\r\n"), std::string::npos) << bad.name;
    }
    const int reached = upstream_requests() - before;
    EXPECT_EQ(reached, bad.reaches ? 1 : 0) << bad.name;
    // And a good request right after, on a new connection.
    const auto good = post_json(harness_->api_port(), "/v1/chat/completions", chat_body());
    EXPECT_EQ(good.status, 200) << bad.name << " left the gateway unable to serve: " << good.body;
  }
  EXPECT_EQ(kill(harness_->gateway().pid(), 0), 0) << "the gateway died";
}

TEST_F(HostileBytes, PipelinedRequestsAreAnsweredInOrderUntilAMalformedOne) {
  const auto body = chat_body();
  const auto answer = raw_exchange(harness_->api_port(), chat(body) + chat(body) + "GARBAGE\r\n\r\n" + chat(body), 3s);
  std::vector<int> statuses;
  for (auto at = answer.find("HTTP/1.1 "); at != std::string::npos; at = answer.find("HTTP/1.1 ", at + 1)) {
    statuses.push_back(std::stoi(answer.substr(at + 9, 3)));
  }
  // Nothing after the malformed request is read: its framing is unknown.
  EXPECT_EQ(statuses, (std::vector<int>{200, 200, 400})) << answer;
}

}  // namespace
}  // namespace kvgate::testing
