#pragma once
// Forwarding one request to a worker of its model and relaying the answer:
// pick (the router decides, then commits), connect or reuse, send, read the response header, relay the
// body piece by piece as it arrives. Retries happen only before the first
// response byte; after it the client owns whatever the worker sent.
#include <optional>
#include <string_view>

#include "kvgate/prompt/prepared_prompt.hpp"
#include "kvgate/proxy/client_session.hpp"
#include "kvgate/route/routing_table.hpp"

namespace kvgate::proxy {

struct ForwardTarget {
  const route::RoutingTable& table;
  const route::ModelRoute& model;
  std::optional<std::string_view> session_key;
  const prompt::PreparedPrompt* prompt = nullptr;  // null: routed without prefix information
  std::string_view session_key_source;             // where session_key came from
};

http::awaitable<void> forward(ClientSession& session, ClientRequest& request, Exchange& exchange,
                              const ForwardTarget& target);

}  // namespace kvgate::proxy
