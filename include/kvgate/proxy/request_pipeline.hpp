#pragma once
// The phases of one proxied request, in order (Pingora's shape): classify
// the path, authenticate, inspect the body, pick a worker, forward, relay.
#include "kvgate/proxy/client_session.hpp"

namespace kvgate::proxy {

http::awaitable<void> handle_request(ClientSession& session, ClientRequest& request, Exchange& exchange);

// A fresh id when the client did not send x-request-id: 32 hex digits.
std::string make_request_id();

}  // namespace kvgate::proxy
