#include "kvgate/openai/usage_scan.hpp"

#include <algorithm>
#include <array>
#include <utility>

#include <nlohmann/json.hpp>

namespace kvgate::openai {
namespace {

struct Key {
  std::string_view text;
  std::optional<std::uint32_t> ReportedUsage::*field;
  std::size_t slot;  // the first key naming the same field: its place in setter_
};

// llama.cpp reports its prompt-cache hit as `timings.cache_n` (in the last
// chunk of a stream, or the answer's `timings`), besides or instead of
// usage.prompt_tokens_details.cached_tokens.
constexpr std::array<Key, 6> kKeys{{{R"("prompt_tokens":)", &ReportedUsage::prompt_tokens, 0},
                                    {R"("completion_tokens":)", &ReportedUsage::completion_tokens, 1},
                                    {R"("cached_tokens":)", &ReportedUsage::cached_tokens, 2},
                                    {R"("cache_n":)", &ReportedUsage::cached_tokens, 2},
                                    {R"("prompt_n":)", &ReportedUsage::evaluated_prompt_tokens, 4},
                                    {R"("predicted_n":)", &ReportedUsage::completion_tokens, 1}}};

// Each key's slot is the first key naming the same field.
static_assert([] {
  for (std::size_t index = 0; index < kKeys.size(); ++index) {
    std::size_t first = index;
    for (std::size_t other = 0; other < index; ++other) {
      if (kKeys[other].field == kKeys[index].field) {
        first = other;
        break;
      }
    }
    if (kKeys[index].slot != first) {
      return false;
    }
  }
  return true;
}());

bool is_digit(char c) {
  return c >= '0' && c <= '9';
}

}  // namespace

// A match counts only when its number is complete: followed by a non-digit
// within `text`, or the text is the end of the body. An incomplete one at
// the end of a piece is found again in the next junction.
// One pass over the text: each quote is checked against the keys (all start
// with a quote and then 'p' or 'c'), instead of one substring search per key
// (six passes that stopped at every quote of the body). Where two keys fill
// one field, the later key in kKeys wins (llama.cpp's timings over its
// usage); else the later occurrence wins.
void UsageScanner::scan(std::string_view text, bool at_end) {
  static_assert(std::tuple_size_v<decltype(setter_)> == kKeys.size());
  for (auto at = text.find('"'); at != std::string_view::npos; at = text.find('"', at + 1)) {
    if (at + 1 >= text.size() || (text[at + 1] != 'p' && text[at + 1] != 'c')) {
      continue;
    }
    for (std::size_t index = 0; index < kKeys.size(); ++index) {
      const Key& key = kKeys[index];
      if (text.compare(at, key.text.size(), key.text) != 0) {
        continue;
      }
      auto position = at + key.text.size();
      while (position < text.size() && text[position] == ' ') {
        ++position;
      }
      std::uint64_t value = 0;
      auto digits_start = position;
      while (position < text.size() && is_digit(text[position]) && position - digits_start < 10) {
        value = value * 10 + static_cast<std::uint64_t>(text[position] - '0');
        ++position;
      }
      const bool complete = position < text.size() ? !is_digit(text[position]) : at_end;
      const std::size_t field = key.slot;
      if (position > digits_start && complete && value <= UINT32_MAX && static_cast<int>(index) >= setter_[field]) {
        usage_.*key.field = static_cast<std::uint32_t>(value);
        setter_[field] = static_cast<int>(index);
      }
      break;
    }
  }
}

void UsageScanner::feed(std::string_view piece) {
  if (!carry_.empty()) {
    junction_.assign(carry_);
    junction_.append(piece.substr(0, kCarryBytes));
    scan(junction_, false);
  }
  scan(piece, false);
  if (piece.size() >= kCarryBytes) {
    carry_.assign(piece.substr(piece.size() - kCarryBytes));
  } else {
    carry_.append(piece);
    if (carry_.size() > kCarryBytes) {
      carry_.erase(0, carry_.size() - kCarryBytes);
    }
  }
}

void UsageScanner::finish() {
  scan(carry_, true);
}

ReportedUsage UsageScanner::usage() const {
  auto usage = usage_;
  if (!usage.prompt_tokens && usage.evaluated_prompt_tokens && usage.cached_tokens) {
    usage.prompt_tokens = *usage.evaluated_prompt_tokens + *usage.cached_tokens;
  }
  return usage;
}

namespace {

// The end of the first event in `text` (just past its blank line), or npos.
std::size_t event_end(std::string_view text) {
  auto lf = text.find("\n\n");
  auto crlf = text.find("\r\n\r\n");
  if (lf == std::string_view::npos && crlf == std::string_view::npos) {
    return std::string_view::npos;
  }
  if (crlf != std::string_view::npos && (lf == std::string_view::npos || crlf < lf)) {
    return crlf + 4;
  }
  return lf + 2;
}

bool usage_only(std::string_view event) {
  return event.find(R"("choices":[])") != std::string_view::npos &&
         event.find(R"("usage":{)") != std::string_view::npos;
}

// What the client gets of a usage-only event: nothing when it holds only
// the chunk envelope and `usage` (vLLM, SGLang); the event without `usage`
// when the engine put more in it (llama.cpp moves its `timings`, with
// `cache_n`, into that chunk); the event untouched when it is not the one
// JSON object kvgate expects. The relay never drops what an engine sent.
void append_without_usage(std::string_view event, std::string& out) {
  static constexpr std::array<std::string_view, 9> kEnvelope{
      "id", "object", "created", "model", "system_fingerprint", "choices", "usage", "service_tier", "obfuscation"};
  constexpr std::string_view kData = "data:";
  auto payload = event;
  if (!payload.starts_with(kData)) {
    out.append(event);
    return;
  }
  payload.remove_prefix(kData.size());
  auto body = nlohmann::ordered_json::parse(payload, nullptr, false);
  if (!body.is_object()) {
    out.append(event);
    return;
  }
  bool more = false;
  for (const auto& [key, value] : body.items()) {
    more = more || std::find(kEnvelope.begin(), kEnvelope.end(), key) == kEnvelope.end();
  }
  if (!more) {
    return;
  }
  body.erase("usage");
  const bool crlf = event.ends_with("\r\n\r\n");
  out.append("data: ");
  out.append(body.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace));
  out.append(crlf ? "\r\n\r\n" : "\n\n");
}

}  // namespace

void UsageEventStripper::feed(std::string_view piece, std::string& out) {
  pending_.append(piece);
  std::string_view rest = pending_;
  for (auto end = event_end(rest); end != std::string_view::npos; end = event_end(rest)) {
    auto event = rest.substr(0, end);
    if (usage_only(event)) {
      append_without_usage(event, out);
    } else {
      out.append(event);
    }
    rest.remove_prefix(end);
  }
  pending_.erase(0, pending_.size() - rest.size());
}

void UsageEventStripper::finish(std::string& out) {
  out.append(pending_);
  pending_.clear();
}

}  // namespace kvgate::openai
