#pragma once
// What both front doors (the proxy and the endpoint picker, src/picker)
// decide the same way about a request before routing it, without Asio.
#include <string>
#include <string_view>

#include "kvgate/route/routing_table.hpp"

namespace kvgate::proxy {

// A fresh id when the client did not send x-request-id: 32 hex digits.
std::string make_request_id();
// A client's x-request-id is kept when it is 1 to 128 visible ASCII bytes.
bool is_acceptable_request_id(std::string_view id);

// Other /v1/* paths go to the model named in a JSON body (`named_model`
// set; null when unknown), else to the first model that has a healthy
// worker.
const route::ModelRoute* model_for_passthrough(const route::RoutingTable& table, std::string_view request_body,
                                               std::string& named_model);

}  // namespace kvgate::proxy
