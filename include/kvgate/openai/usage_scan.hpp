#pragma once
// Reading `usage` out of an engine's response as it streams through, without
// parsing the body: in JSON text a key's quotes cannot be escaped, so
// `"cached_tokens":` with real quotes can only be that key (inside a string
// it would read `\"cached_tokens\":`). The last value seen wins (streams
// with continuous usage report it in every chunk; the final one is the
// total).
//
// And, for a stream whose usage kvgate asked for although the client did
// not (stream_options.include_usage added to measure cache hits), removing
// the usage-only event (empty "choices", a "usage" object) so the client
// gets exactly the stream it asked for.
#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace kvgate::openai {

struct ReportedUsage {
  std::optional<std::uint32_t> prompt_tokens;
  std::optional<std::uint32_t> completion_tokens;
  std::optional<std::uint32_t> cached_tokens;  // prompt_tokens_details.cached_tokens
  // llama.cpp's timings.prompt_n: the prompt tokens it computed (the rest,
  // cache_n, came from its slot). With cache_n it gives the prompt's length
  // when no usage object came (a stream nobody asked usage of).
  std::optional<std::uint32_t> evaluated_prompt_tokens;
};

class UsageScanner {
 public:
  // Pieces in order; a key or number split between pieces is still found.
  void feed(std::string_view piece);
  // Call once at the end of the body.
  void finish();
  [[nodiscard]] ReportedUsage usage() const;

 private:
  // The last bytes of the previous pieces, so that a match across a piece
  // boundary is seen; longer than any key plus a 10-digit number.
  static constexpr std::size_t kCarryBytes = 64;
  void scan(std::string_view text, bool at_end);

  std::string carry_;
  std::string junction_;  // reused buffer: carry + the start of the next piece
  ReportedUsage usage_;
  // Per field (by the first key naming it): the key that set it, -1 for none.
  // A later key in the list outranks an earlier one for the whole body (the
  // junctions and the final carry are scanned apart, and must not undo it).
  std::array<int, 6> setter_{-1, -1, -1, -1, -1, -1};
};

class UsageEventStripper {
 public:
  // Appends to `out` what the client gets of `piece`: whole server-sent
  // events, minus usage-only ones; an incomplete event is held back.
  void feed(std::string_view piece, std::string& out);
  // The stream ended: whatever is held goes out as it is.
  void finish(std::string& out);

 private:
  std::string pending_;
};

}  // namespace kvgate::openai
