#include "kvgate/prefix/attention.hpp"

namespace kvgate::prefix {

std::string to_string(const LocalAttention& attention) {
  switch (attention.kind) {
    case AttentionKind::sliding_window:
      return "sliding_window " + std::to_string(attention.tokens);
    case AttentionKind::chunked_local:
      return "chunked_local " + std::to_string(attention.tokens);
    case AttentionKind::full:
      break;
  }
  return "full";
}

}  // namespace kvgate::prefix
