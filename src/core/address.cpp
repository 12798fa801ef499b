#include "kvgate/core/address.hpp"

#include <algorithm>
#include <cctype>

#include "kvgate/core/units.hpp"

namespace kvgate {
namespace {

bool is_hostname_char(char character) {
  return std::isalnum(static_cast<unsigned char>(character)) != 0 || character == '-' || character == '.' ||
         character == '_';
}

Result<std::uint16_t, std::string> parse_port(std::string_view text) {
  const auto value = parse_whole_number(text);
  if (!value || *value > 65535) {
    return unexpected(std::string("port must be a number from 0 to 65535"));
  }
  return static_cast<std::uint16_t>(*value);
}

Result<HostPort, std::string> parse_authority(std::string_view text) {
  HostPort result;
  std::string_view port_text;
  if (text.starts_with('[')) {
    auto close = text.find(']');
    if (close == std::string_view::npos) {
      return unexpected(std::string("unterminated '[' in IPv6 address"));
    }
    result.host = std::string(text.substr(1, close - 1));
    auto rest = text.substr(close + 1);
    if (!rest.starts_with(':')) {
      return unexpected(std::string("expected ':port' after IPv6 address"));
    }
    port_text = rest.substr(1);
    if (result.host.empty() || result.host.find_first_not_of("0123456789abcdefABCDEF:.") != std::string::npos) {
      return unexpected(std::string("invalid IPv6 address"));
    }
  } else {
    auto colon = text.rfind(':');
    if (colon == std::string_view::npos) {
      return unexpected(std::string("expected host:port"));
    }
    result.host = std::string(text.substr(0, colon));
    port_text = text.substr(colon + 1);
    if (result.host.empty()) {
      return unexpected(std::string("host is empty"));
    }
    if (!std::all_of(result.host.begin(), result.host.end(), is_hostname_char)) {
      return unexpected(std::string("host '") + result.host + "' has characters not allowed in a host name");
    }
  }
  auto port = parse_port(port_text);
  if (!port) {
    return unexpected(port.error());
  }
  result.port = *port;
  return result;
}

}  // namespace

std::string HostPort::to_string() const {
  if (host.find(':') != std::string::npos) {
    return "[" + host + "]:" + std::to_string(port);
  }
  return host + ":" + std::to_string(port);
}

Result<HostPort, std::string> parse_listen_address(std::string_view text) {
  return parse_authority(text);
}

Result<HttpUrl, std::string> parse_upstream_url(std::string_view text) {
  constexpr std::string_view kScheme = "http://";
  if (text.starts_with("https://")) {
    return unexpected(std::string("https upstreams are not supported: kvgate speaks plain HTTP to engines"));
  }
  if (!text.starts_with(kScheme)) {
    return unexpected(std::string("URL must start with http://"));
  }
  auto rest = text.substr(kScheme.size());
  if (rest.ends_with('/')) {
    rest.remove_suffix(1);
  }
  if (rest.find('/') != std::string_view::npos || rest.find('?') != std::string_view::npos) {
    return unexpected(std::string("URL must not have a path: engines serve the API at their root"));
  }
  if (rest.find('@') != std::string_view::npos) {
    return unexpected(std::string("URL must not carry credentials"));
  }
  bool has_port =
      rest.starts_with('[') ? rest.find("]:") != std::string_view::npos : rest.find(':') != std::string_view::npos;
  std::string authority_text(rest);
  if (!has_port) {
    authority_text += ":80";
  }
  auto authority = parse_authority(authority_text);
  if (!authority) {
    return unexpected(authority.error());
  }
  if (authority->port == 0) {
    return unexpected(std::string("port 0 cannot be connected to"));
  }
  if (authority->host == "0.0.0.0" || authority->host == "::") {
    return unexpected(std::string("the wildcard address ") + authority->host + " cannot be connected to");
  }
  HttpUrl url;
  url.authority = std::move(*authority);
  url.host_header = url.authority.to_string();
  return url;
}

}  // namespace kvgate
