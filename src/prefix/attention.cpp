#include "kvgate/prefix/attention.hpp"

namespace kvgate::prefix {

std::string to_string(const LocalAttention& attention) {
  const auto groups = attention.groups > 1 ? " x " + std::to_string(attention.groups) + " groups" : std::string();
  switch (attention.kind) {
    case AttentionKind::sliding_window:
      return "sliding_window " + std::to_string(attention.tokens) + groups;
    case AttentionKind::chunked_local:
      return "chunked_local " + std::to_string(attention.tokens) + groups;
    case AttentionKind::full:
      break;
  }
  return "full";
}

}  // namespace kvgate::prefix
