#pragma once
// A request's session key sources as inspect_request reads them: the
// configured list (sessions.key_from, config/options.hpp) and the values
// of its header sources, which the shell looks up. Pure.
#include <array>
#include <span>
#include <string_view>

#include "kvgate/config/options.hpp"

namespace kvgate::openai {

// The values of a request's header sources, by source position (empty for
// body sources and absent headers).
using SessionHeaderValues = std::array<std::string_view, config::kMaxSessionKeySources>;

template <class HeaderLookup>
SessionHeaderValues session_header_values(std::span<const config::SessionKeySource> sources, HeaderLookup&& lookup) {
  SessionHeaderValues values{};
  for (std::size_t at = 0; at < sources.size() && at < config::kMaxSessionKeySources; ++at) {
    if (sources[at].place == config::SessionKeyPlace::header) {
      values[at] = lookup(std::string_view(sources[at].name));
    }
  }
  return values;
}

// What inspect_request needs to find the key. No sources: no session key.
struct SessionKeyInput {
  std::span<const config::SessionKeySource> sources;
  SessionHeaderValues header_values{};
};

}  // namespace kvgate::openai
