#pragma once
// Forwarding one request to a worker of its model and relaying the answer:
// pick (policy), connect or reuse, send, read the response header, relay the
// body piece by piece as it arrives. Retries happen only before the first
// response byte; after it the client owns whatever the worker sent.
#include <optional>
#include <string_view>

#include "kvgate/proxy/client_session.hpp"
#include "kvgate/proxy/prefix_lookup.hpp"
#include "kvgate/proxy/routing_table.hpp"

namespace kvgate::proxy {

struct ForwardTarget {
  const RoutingTable& table;
  const ModelRoute& model;
  std::optional<std::string_view> session_key;
  const PromptBlocks* prompt = nullptr;  // null: routed without prefix information
};

http::awaitable<void> forward(ClientSession& session, ClientRequest& request, Exchange& exchange,
                              const ForwardTarget& target);

}  // namespace kvgate::proxy
