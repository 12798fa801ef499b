#pragma once
// The admin listener: /healthz, /readyz, /metrics, /debug/*. Separate from
// the data plane so that scrapes and probes never queue behind client
// traffic limits. Runs on the control thread's io_context.
#include <functional>
#include <string>

#include "kvgate/gateway/context.hpp"
#include "kvgate/http/beast.hpp"

namespace kvgate::admin {

class AdminServer {
 public:
  AdminServer(http::asio::io_context& io, gateway::GatewayContext& context) : io_(io), context_(context) {}

  Result<http::tcp::endpoint, std::string> bind(const http::tcp::endpoint& endpoint);
  void start();
  void stop();  // control thread only

 private:
  http::awaitable<void> accept_loop();
  http::awaitable<void> serve(http::tcp::socket socket);

  http::asio::io_context& io_;
  gateway::GatewayContext& context_;
  http::tcp::acceptor acceptor_{io_};
};

struct AdminResponse {
  unsigned status = 200;
  std::string content_type = "application/json";
  std::string body;
};

// A request header's value by name (empty when absent).
using HeaderLookup = std::function<std::string_view(std::string_view)>;

// Request handling, separate from the socket code. `target` is the request
// target (path and query); `header` reads the request's headers (the
// session key sources of POST /debug/route).
AdminResponse handle_admin_request(gateway::GatewayContext& context, http::bhttp::verb method, std::string_view target,
                                   std::string_view body, const HeaderLookup& header);

}  // namespace kvgate::admin
