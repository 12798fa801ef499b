#pragma once
// Pure parsing of the network addresses that appear in configuration:
// listen addresses ("127.0.0.1:8080", "[::1]:8080") and upstream base URLs
// ("http://10.0.0.7:8000"). Nothing here resolves names or opens sockets.
#include <cstdint>
#include <string>
#include <string_view>

#include "kvgate/core/result.hpp"

namespace kvgate {

struct HostPort {
  std::string host;  // IPv6 literals without brackets
  std::uint16_t port = 0;

  [[nodiscard]] std::string to_string() const;  // brackets IPv6 literals again
  bool operator==(const HostPort&) const = default;
};

// Port 0 is allowed (the kernel picks one; tests rely on that).
Result<HostPort, std::string> parse_listen_address(std::string_view text);

struct HttpUrl {
  HostPort authority;
  std::string host_header;  // what to send as Host: "name:port"
  bool operator==(const HttpUrl&) const = default;
};

// Only plain http:// base URLs without a path: engines serve the OpenAI API
// at their root, and TLS to the engines is terminated outside kvgate.
Result<HttpUrl, std::string> parse_upstream_url(std::string_view text);

}  // namespace kvgate
