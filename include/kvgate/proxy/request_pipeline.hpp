#pragma once
// The phases of one proxied request, in order (Pingora's shape): classify
// the path, authenticate, inspect the body, pick a worker, forward, relay.
#include "kvgate/proxy/client_session.hpp"
#include "kvgate/proxy/front_door.hpp"

namespace kvgate::proxy {

http::awaitable<void> handle_request(ClientSession& session, ClientRequest& request, Exchange& exchange);

}  // namespace kvgate::proxy
