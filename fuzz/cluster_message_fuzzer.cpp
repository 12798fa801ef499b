// Arbitrary bytes as a peer replica's message (the cluster's stream is
// written by every replica that can reach Redis): decode() returns a
// message or the reason it refused one; it never crashes or reads past the
// bytes, and what it accepts encodes back to the same bytes.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <variant>

#include "kvgate/cluster/message.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  auto message = kvgate::cluster::decode(bytes);
  if (!message) {
    return 0;
  }
  std::string again;
  kvgate::cluster::encode_header(again, message->kind, message->sent_unix_ms, message->from, message->incarnation);
  std::visit([&](const auto& body) { kvgate::cluster::encode(again, body); }, message->body);
  // Varints may be written longer than needed and kv_usage/ttft are rounded:
  // a re-encoding decodes, and decodes to the same kind and sender.
  auto decoded = kvgate::cluster::decode(again);
  if (!decoded || decoded->kind != message->kind || decoded->from != message->from) {
    __builtin_trap();
  }
  return 0;
}
