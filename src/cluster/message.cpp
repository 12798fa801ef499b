#include "kvgate/cluster/message.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>

namespace kvgate::cluster {

std::string_view to_string(MessageKind kind) {
  switch (kind) {
    case MessageKind::turn:
      return "turn";
    case MessageKind::outcome:
      return "outcome";
    case MessageKind::assumed:
      return "assumed";
    case MessageKind::withdrawn:
      return "withdrawn";
    case MessageKind::finished:
      return "finished";
    case MessageKind::load:
      return "load";
    case MessageKind::learned:
      return "learned";
    case MessageKind::answered:
      return "answered";
  }
  return "unknown";
}

std::string_view to_string(DropReason reason) {
  switch (reason) {
    case DropReason::malformed:
      return "malformed";
    case DropReason::unknown_version:
      return "unknown_version";
    case DropReason::unknown_model:
      return "unknown_model";
    case DropReason::unknown_worker:
      return "unknown_worker";
    case DropReason::stale:
      return "stale";
    case DropReason::queue_full:
      return "queue_full";
    case DropReason::engine_down:
      return "engine_down";
  }
  return "unknown";
}

namespace {

constexpr char kMagic0 = 'K';
constexpr char kMagic1 = 'G';
constexpr std::uint8_t kNoReason = 0xff;
constexpr auto kLastReason = static_cast<std::uint8_t>(policy::Reason::prefill_unavailable);

void put_u8(std::string& out, std::uint8_t value) {
  out.push_back(static_cast<char>(value));
}

void put_varint(std::string& out, std::uint64_t value) {
  while (value >= 0x80) {
    out.push_back(static_cast<char>((value & 0x7f) | 0x80));
    value >>= 7;
  }
  out.push_back(static_cast<char>(value));
}

void put_text(std::string& out, std::string_view text) {
  text = text.substr(0, kMaxText);
  put_varint(out, text.size());
  out.append(text);
}

std::uint64_t micros(double ms) {
  return ms > 0 && std::isfinite(ms) ? static_cast<std::uint64_t>(std::llround(ms * 1'000.0)) : 0;
}

// Reads untrusted bytes; every read checks what is left.
class Reader {
 public:
  explicit Reader(std::string_view bytes) : bytes_(bytes) {}

  bool u8(std::uint8_t& out) {
    if (at_ >= bytes_.size()) {
      return false;
    }
    out = static_cast<std::uint8_t>(bytes_[at_++]);
    return true;
  }
  bool varint(std::uint64_t& out) {
    out = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      std::uint8_t byte = 0;
      if (!u8(byte)) {
        return false;
      }
      if (shift == 63 && (byte & 0x7e) != 0) {
        return false;  // beyond 64 bits
      }
      out |= static_cast<std::uint64_t>(byte & 0x7f) << shift;
      if ((byte & 0x80) == 0) {
        return true;
      }
    }
    return false;
  }
  template <class Int>
  bool bounded(Int& out, std::uint64_t max) {
    std::uint64_t value = 0;
    if (!varint(value) || value > max) {
      return false;
    }
    out = static_cast<Int>(value);
    return true;
  }
  bool text(std::string_view& out) {
    std::size_t size = 0;
    if (!bounded(size, kMaxText) || bytes_.size() - at_ < size) {
      return false;
    }
    out = bytes_.substr(at_, size);
    at_ += size;
    return true;
  }
  bool u64(std::uint64_t& out) {
    if (bytes_.size() - at_ < 8) {
      return false;
    }
    out = 0;
    for (int byte = 0; byte < 8; ++byte) {
      out |= static_cast<std::uint64_t>(static_cast<std::uint8_t>(bytes_[at_ + byte])) << (8 * byte);
    }
    at_ += 8;
    return true;
  }
  // An optional field, read only when its flag says it is present.
  bool optional_count(bool present, std::optional<std::uint32_t>& out) {
    std::uint32_t count = 0;
    if (!present) {
      return true;
    }
    if (!bounded(count, UINT32_MAX)) {
      return false;
    }
    out = count;
    return true;
  }
  bool optional_ms(bool present, std::optional<double>& out) {  // sent in microseconds
    std::uint64_t us = 0;
    if (!present) {
      return true;
    }
    if (!varint(us)) {
      return false;
    }
    out = static_cast<double>(us) / 1'000.0;
    return true;
  }
  [[nodiscard]] std::size_t left() const { return bytes_.size() - at_; }

 private:
  std::string_view bytes_;
  std::size_t at_ = 0;
};

bool read_reason(Reader& reader, policy::Reason& out) {
  std::uint8_t value = 0;
  if (!reader.u8(value) || value > kLastReason) {
    return false;
  }
  out = static_cast<policy::Reason>(value);
  return true;
}

bool read(Reader& reader, TurnMessage& turn) {
  std::uint8_t prefill = 0;
  std::uint8_t retry = 0;
  std::uint64_t usage = 0;
  if (!reader.text(turn.model) || !reader.text(turn.key) || !reader.text(turn.key_source) ||
      !reader.varint(turn.number) || !reader.text(turn.worker) || !reader.text(turn.prefill_worker) ||
      !read_reason(reader, turn.reason) || !reader.u8(prefill) || !reader.bounded(turn.input_tokens, UINT32_MAX) ||
      !reader.bounded(turn.predicted_cached_tokens, UINT32_MAX) || !reader.bounded(usage, 1'001) || !reader.u8(retry) ||
      retry > 1 || turn.number == 0 || turn.key.empty()) {
    return false;
  }
  if (prefill != kNoReason) {
    if (prefill > kLastReason) {
      return false;
    }
    turn.prefill = static_cast<policy::Reason>(prefill);
  }
  if (usage > 0) {
    turn.kv_usage = static_cast<double>(usage - 1) / 1'000.0;
  }
  turn.retry = retry == 1;
  return true;
}

bool read(Reader& reader, OutcomeMessage& outcome) {
  std::uint8_t flags = 0;
  if (!reader.text(outcome.model) || !reader.text(outcome.key) || !reader.varint(outcome.number) ||
      !reader.bounded(outcome.status, 999) || !reader.u8(flags) || flags > 0x0f) {
    return false;
  }
  return reader.optional_count((flags & 1) != 0, outcome.cached_tokens) &&
         reader.optional_count((flags & 2) != 0, outcome.prompt_tokens) &&
         reader.optional_ms((flags & 4) != 0, outcome.ttft_ms) &&
         reader.optional_ms((flags & 8) != 0, outcome.decode_ms);
}

bool read(Reader& reader, BlocksMessage& blocks) {
  std::size_t count = 0;
  if (!reader.text(blocks.model) || !reader.text(blocks.worker) || !reader.varint(blocks.ticket) ||
      !reader.bounded(count, kMaxBlocks) || reader.left() < count * 8) {
    return false;
  }
  blocks.blocks.resize(count);
  for (auto& block : blocks.blocks) {
    if (!reader.u64(block)) {
      return false;
    }
  }
  return true;
}

bool read(Reader& reader, FinishedMessage& finished) {
  return reader.text(finished.model) && reader.text(finished.worker) && reader.varint(finished.ticket);
}

bool read(Reader& reader, AnsweredMessage& answered) {
  std::uint8_t flags = 0;
  return reader.text(answered.key) && !answered.key.empty() && reader.varint(answered.number) && answered.number != 0 &&
         reader.u8(flags) && flags <= 1 && reader.optional_count((flags & 1) != 0, answered.answer_tokens);
}

bool read(Reader& reader, LoadMessage& load) {
  std::size_t count = 0;
  // Each entry takes at least five bytes: a count beyond what is left is a lie.
  if (!reader.bounded(count, kMaxLoadEntries) || reader.left() < count * 5) {
    return false;
  }
  load.workers.resize(count);
  for (auto& worker : load.workers) {
    if (!reader.text(worker.worker) || !reader.bounded(worker.in_flight, UINT32_MAX) ||
        !reader.varint(worker.pending_prefill_tokens) || !reader.bounded(worker.pending_requests, UINT32_MAX) ||
        !reader.varint(worker.active_tokens)) {
      return false;
    }
  }
  return true;
}

bool read_forecast(bool present, Reader& reader, route::CostSample& sample) {
  std::optional<double> forecast_ms;
  if (!reader.optional_ms(present, forecast_ms)) {
    return false;
  }
  sample.slot_forecast_ms = forecast_ms.value_or(0.0);
  return true;
}

bool read(Reader& reader, LearnedMessage& learned) {
  auto& sample = learned.sample;
  std::uint8_t flags = 0;
  std::uint64_t expected_us = 0;
  std::uint64_t queue_us = 0;
  if (!reader.text(learned.model) || !reader.text(learned.worker) || !reader.u8(flags) || !reader.varint(expected_us) ||
      !reader.varint(queue_us) || !reader.bounded(sample.slots, UINT32_MAX) ||
      !reader.bounded(sample.requests_ahead, UINT32_MAX) || !reader.varint(sample.queued_tokens) ||
      !reader.varint(sample.active_tokens) || !reader.bounded(sample.indexed_cached_tokens, UINT32_MAX) ||
      !reader.bounded(sample.offloaded_cached_tokens, UINT32_MAX)) {
    return false;
  }
  sample.worker_busy = (flags & 1) != 0;
  sample.expected_ttft_ms = expected_us > 0 ? static_cast<double>(expected_us) / 1'000.0 : -1;
  sample.queue_delay_ms = static_cast<double>(queue_us) / 1'000.0;
  return reader.optional_ms((flags & 2) != 0, sample.ttft_ms) &&
         reader.optional_ms((flags & 4) != 0, sample.decode_ms) &&
         reader.optional_count((flags & 8) != 0, sample.prompt_tokens) &&
         reader.optional_count((flags & 16) != 0, sample.cached_tokens) &&
         reader.optional_ms((flags & 32) != 0, sample.slot_hold_ms) &&
         read_forecast((flags & 64) != 0, reader, sample) &&
         reader.optional_ms((flags & 128) != 0, sample.slot_wait_ms);
}

}  // namespace

void encode_header(std::string& out, MessageKind kind, std::uint64_t sent_unix_ms, std::string_view from,
                   std::uint64_t incarnation) {
  out.push_back(kMagic0);
  out.push_back(kMagic1);
  put_u8(out, kWireVersion);
  put_u8(out, static_cast<std::uint8_t>(kind));
  put_varint(out, sent_unix_ms);
  put_text(out, from);
  put_varint(out, incarnation);
}

void encode(std::string& out, const TurnMessage& turn) {
  put_text(out, turn.model);
  put_text(out, turn.key);
  put_text(out, turn.key_source);
  put_varint(out, turn.number);
  put_text(out, turn.worker);
  put_text(out, turn.prefill_worker);
  put_u8(out, static_cast<std::uint8_t>(turn.reason));
  put_u8(out, turn.prefill ? static_cast<std::uint8_t>(*turn.prefill) : kNoReason);
  put_varint(out, turn.input_tokens);
  put_varint(out, turn.predicted_cached_tokens);
  put_varint(out, turn.kv_usage
                      ? 1 + static_cast<std::uint64_t>(std::lround(std::clamp(*turn.kv_usage, 0.0, 1.0) * 1'000.0))
                      : 0);
  put_u8(out, turn.retry ? 1 : 0);
}

void encode(std::string& out, const OutcomeMessage& outcome) {
  put_text(out, outcome.model);
  put_text(out, outcome.key);
  put_varint(out, outcome.number);
  put_varint(out, static_cast<std::uint64_t>(std::clamp(outcome.status, 0, 999)));
  const std::uint8_t flags = (outcome.cached_tokens ? 1 : 0) | (outcome.prompt_tokens ? 2 : 0) |
                             (outcome.ttft_ms ? 4 : 0) | (outcome.decode_ms ? 8 : 0);
  put_u8(out, flags);
  if (outcome.cached_tokens) {
    put_varint(out, *outcome.cached_tokens);
  }
  if (outcome.prompt_tokens) {
    put_varint(out, *outcome.prompt_tokens);
  }
  if (outcome.ttft_ms) {
    put_varint(out, micros(*outcome.ttft_ms));
  }
  if (outcome.decode_ms) {
    put_varint(out, micros(*outcome.decode_ms));
  }
}

void encode_blocks(std::string& out, std::string_view model, std::string_view worker, std::uint64_t ticket,
                   const std::uint64_t* blocks, std::size_t count) {
  count = std::min(count, kMaxBlocks);
  put_text(out, model);
  put_text(out, worker);
  put_varint(out, ticket);
  put_varint(out, count);
  // One resize, then plain stores: a long prompt has thousands of blocks.
  const auto at = out.size();
  out.resize(at + count * 8);
  auto* bytes = reinterpret_cast<unsigned char*>(out.data() + at);
  if (count == 0) {
    return;  // an empty vector's data() may be null, which memcpy must not see
  }
  if constexpr (std::endian::native == std::endian::little) {
    std::memcpy(bytes, blocks, count * 8);
  } else {
    for (std::size_t index = 0; index < count; ++index) {
      const auto value = blocks[index];
      for (int byte = 0; byte < 8; ++byte) {
        bytes[index * 8 + static_cast<std::size_t>(byte)] = static_cast<unsigned char>(value >> (8 * byte));
      }
    }
  }
}

void encode(std::string& out, const BlocksMessage& blocks) {
  encode_blocks(out, blocks.model, blocks.worker, blocks.ticket, blocks.blocks.data(), blocks.blocks.size());
}

void encode(std::string& out, const FinishedMessage& finished) {
  put_text(out, finished.model);
  put_text(out, finished.worker);
  put_varint(out, finished.ticket);
}

void encode(std::string& out, const LoadMessage& load) {
  const auto count = std::min(load.workers.size(), kMaxLoadEntries);
  put_varint(out, count);
  for (std::size_t index = 0; index < count; ++index) {
    const auto& worker = load.workers[index];
    put_text(out, worker.worker);
    put_varint(out, worker.in_flight);
    put_varint(out, worker.pending_prefill_tokens);
    put_varint(out, worker.pending_requests);
    put_varint(out, worker.active_tokens);
  }
}

void encode(std::string& out, const LearnedMessage& learned) {
  const auto& sample = learned.sample;
  put_text(out, learned.model);
  put_text(out, learned.worker);
  const std::uint8_t flags = (sample.worker_busy ? 1 : 0) | (sample.ttft_ms ? 2 : 0) | (sample.decode_ms ? 4 : 0) |
                             (sample.prompt_tokens ? 8 : 0) | (sample.cached_tokens ? 16 : 0) |
                             (sample.slot_hold_ms ? 32 : 0) | (sample.slot_forecast_ms > 0 ? 64 : 0) |
                             (sample.slot_wait_ms ? 128 : 0);
  put_u8(out, flags);
  put_varint(out, micros(sample.expected_ttft_ms));
  put_varint(out, micros(sample.queue_delay_ms));
  put_varint(out, sample.slots);
  put_varint(out, sample.requests_ahead);
  put_varint(out, sample.queued_tokens);
  put_varint(out, sample.active_tokens);
  put_varint(out, sample.indexed_cached_tokens);
  put_varint(out, sample.offloaded_cached_tokens);
  if (sample.ttft_ms) {
    put_varint(out, micros(*sample.ttft_ms));
  }
  if (sample.decode_ms) {
    put_varint(out, micros(*sample.decode_ms));
  }
  if (sample.prompt_tokens) {
    put_varint(out, *sample.prompt_tokens);
  }
  if (sample.cached_tokens) {
    put_varint(out, *sample.cached_tokens);
  }
  if (sample.slot_hold_ms) {
    put_varint(out, micros(*sample.slot_hold_ms));
  }
  if (sample.slot_forecast_ms > 0) {
    put_varint(out, micros(sample.slot_forecast_ms));
  }
  if (sample.slot_wait_ms) {
    put_varint(out, micros(*sample.slot_wait_ms));
  }
}

void encode(std::string& out, const AnsweredMessage& answered) {
  put_text(out, answered.key);
  put_varint(out, answered.number);
  put_u8(out, answered.answer_tokens ? 1 : 0);
  if (answered.answer_tokens) {
    put_varint(out, *answered.answer_tokens);
  }
}

Result<Message, DropReason> decode(std::string_view bytes) {
  if (bytes.size() < 4 || bytes[0] != kMagic0 || bytes[1] != kMagic1) {
    return unexpected(DropReason::malformed);
  }
  if (static_cast<std::uint8_t>(bytes[2]) != kWireVersion) {
    return unexpected(DropReason::unknown_version);
  }
  Reader reader(bytes.substr(4));
  Message message;
  const auto kind = static_cast<std::uint8_t>(bytes[3]);
  if (kind < static_cast<std::uint8_t>(MessageKind::turn) || kind > static_cast<std::uint8_t>(MessageKind::answered)) {
    return unexpected(DropReason::malformed);
  }
  message.kind = static_cast<MessageKind>(kind);
  if (!reader.varint(message.sent_unix_ms) || !reader.text(message.from) || message.from.empty() ||
      !reader.varint(message.incarnation)) {
    return unexpected(DropReason::malformed);
  }
  bool ok = false;
  switch (message.kind) {
    case MessageKind::turn:
      ok = read(reader, message.body.emplace<TurnMessage>());
      break;
    case MessageKind::outcome:
      ok = read(reader, message.body.emplace<OutcomeMessage>());
      break;
    case MessageKind::assumed:
    case MessageKind::withdrawn:
      ok = read(reader, message.body.emplace<BlocksMessage>());
      break;
    case MessageKind::finished:
      ok = read(reader, message.body.emplace<FinishedMessage>());
      break;
    case MessageKind::load:
      ok = read(reader, message.body.emplace<LoadMessage>());
      break;
    case MessageKind::learned:
      ok = read(reader, message.body.emplace<LearnedMessage>());
      break;
    case MessageKind::answered:
      ok = read(reader, message.body.emplace<AnsweredMessage>());
      break;
  }
  // Trailing bytes are refused: version 1 defines every field.
  if (!ok || reader.left() != 0) {
    return unexpected(DropReason::malformed);
  }
  return message;
}

}  // namespace kvgate::cluster
