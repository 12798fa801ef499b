#include <algorithm>
#include <cctype>
#include <string>
#include <vector>

#include "kvgate/http/beast.hpp"

namespace kvgate::http {

void strip_hop_by_hop(bhttp::fields& fields) {
  std::vector<std::string> named;
  for (auto token : bhttp::token_list{fields[bhttp::field::connection]}) {
    named.emplace_back(token);
  }
  for (const auto& name : named) {
    fields.erase(name);
  }
  for (auto field : {bhttp::field::connection, bhttp::field::keep_alive, bhttp::field::proxy_connection,
                     bhttp::field::proxy_authenticate, bhttp::field::proxy_authorization, bhttp::field::te,
                     bhttp::field::trailer, bhttp::field::transfer_encoding, bhttp::field::upgrade}) {
    fields.erase(field);
  }
}

std::string media_type(const bhttp::fields& fields) {
  auto value = fields[bhttp::field::content_type];
  auto end = value.find(';');
  std::string type(value.substr(0, end));
  while (!type.empty() && type.back() == ' ') {
    type.pop_back();
  }
  std::transform(type.begin(), type.end(), type.begin(),
                 [](unsigned char character) { return static_cast<char>(std::tolower(character)); });
  return type;
}

}  // namespace kvgate::http
