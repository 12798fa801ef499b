#pragma once
// Blocking HTTP/1.1 client for integration tests (Beast over a socket with
// receive/send timeouts, so a hung server fails the test instead of hanging
// it). Header names in responses are lower-cased.
#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace kvgate::testing {

using Headers = std::vector<std::pair<std::string, std::string>>;

struct HttpResponse {
  int status = 0;
  std::map<std::string, std::string> headers;
  std::string body;

  [[nodiscard]] std::string header(const std::string& name) const;
};

// One request on a fresh connection. Throws on connection or timeout errors.
HttpResponse http_request(int port, const std::string& method, const std::string& target, const std::string& body = "",
                          const Headers& headers = {},
                          std::chrono::milliseconds timeout = std::chrono::milliseconds(10'000));

HttpResponse post_json(int port, const std::string& target, const std::string& body, const Headers& headers = {});
HttpResponse get(int port, const std::string& target);

// Sends raw bytes and returns everything read until the server closes (or
// the timeout): for malformed requests and chunked uploads.
std::string raw_exchange(int port, const std::string& bytes,
                         std::chrono::milliseconds timeout = std::chrono::milliseconds(5000));

// A streaming request whose response body is read event by event.
class EventStream {
 public:
  EventStream(int port, const std::string& target, const std::string& body, const Headers& headers = {});
  ~EventStream();
  EventStream(const EventStream&) = delete;
  EventStream& operator=(const EventStream&) = delete;

  [[nodiscard]] int status() const;
  [[nodiscard]] std::string header(const std::string& name) const;
  // The next `data:` payload; nullopt when the body ended.
  std::optional<std::string> next_event(std::chrono::milliseconds timeout = std::chrono::milliseconds(10'000));
  // Every remaining payload until the end of the body.
  std::vector<std::string> rest();
  // Every payload up to and including [DONE], as the openai SDK reads a
  // stream (it stops there), then closes.
  std::vector<std::string> until_done();
  // Closes the connection abruptly, as a client that gives up.
  void close();

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace kvgate::testing
