#pragma once
// What one kvgate replica tells the others of its cluster, as bytes: the
// turns it routed, their outcomes, the routing-time inserts it made (and
// withdrew), the slots it freed, its in-flight counts per worker, what
// its answers taught of the workers' costs and how long its sessions'
// answers were. Pure:
// encode() appends to a caller's buffer (whose capacity is reused, so a
// warm publisher does not allocate), decode() reads untrusted bytes into
// views of them and returns why it refused them.
//
// Wire format, version 1 (little-endian, unsigned LEB128 varints "v"):
//   'K' 'G' version:u8 kind:u8 sent_unix_ms:v from:str incarnation:v  then the kind's fields
//   str = length:v bytes (at most kMaxText bytes)
//   turn      model:str key:str key_source:str number:v worker:str prefill_worker:str
//             reason:u8 prefill_reason:u8 (0xff: none) input_tokens:v predicted_cached:v
//             kv_usage_permille:v (0: unknown, else 1 + permille) retry:u8
//   outcome   model:str key:str number:v status:v flags:u8 (bit i: field i present)
//             cached_tokens:v prompt_tokens:v ttft_us:v decode_us:v (present ones only)
//   assumed / withdrawn
//             model:str worker:str ticket:v count:v count x hash:u64
//   finished  model:str worker:str ticket:v
//   load      count:v count x (worker:str in_flight:v pending_prefill_tokens:v
//             pending_requests:v active_tokens:v)  (worker ids are unique across models)
//   learned   model:str worker:str flags:u8 (bit 0: worker busy; bits 1-7: ttft,
//             decode, prompt_tokens, cached_tokens, slot_hold, slot_forecast,
//             slot_wait present)
//             expected_ttft_us:v (0: not priced) queue_delay_us:v slots:v
//             requests_ahead:v queued_tokens:v active_tokens:v indexed_cached:v
//             offloaded_cached:v ttft_us:v decode_us:v prompt_tokens:v
//             cached_tokens:v slot_hold_us:v slot_forecast_us:v slot_wait_us:v
//             (present ones only)
//   answered  key:str number:v flags:u8 (bit 0: answer_tokens present) answer_tokens:v
// A reader of an older version 1 without `learned` or `answered`, or
// without learned's slot_wait bit, refuses those as malformed (counted)
// and applies the rest.
// `incarnation` tells a replica's processes apart (a restarted replica
// keeps its id): a reader skips its own messages by it, not by a clock. A
// reader refuses versions it does not know, and trailing bytes, rather
// than guess.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "kvgate/core/result.hpp"
#include "kvgate/policy/reason.hpp"
#include "kvgate/route/cost_sample.hpp"

namespace kvgate::cluster {

inline constexpr std::uint8_t kWireVersion = 1;
inline constexpr std::size_t kMaxText = 4'096;
inline constexpr std::size_t kMaxBlocks = 1U << 20;
inline constexpr std::size_t kMaxLoadEntries = 4'096;

enum class MessageKind : std::uint8_t {
  turn = 1,
  outcome = 2,
  assumed = 3,
  withdrawn = 4,
  finished = 5,
  load = 6,
  learned = 7,
  answered = 8,
};
std::string_view to_string(MessageKind kind);
inline constexpr MessageKind kMessageKinds[] = {MessageKind::turn,      MessageKind::outcome,  MessageKind::assumed,
                                                MessageKind::withdrawn, MessageKind::finished, MessageKind::load,
                                                MessageKind::learned,   MessageKind::answered};

// Why a message was not applied (kvgate_cluster_dropped_total{reason}).
enum class DropReason : std::uint8_t {
  malformed,        // not this format, truncated, a field out of range
  unknown_version,  // a version this replica does not read
  unknown_model,    // names a model this replica does not serve
  unknown_worker,   // names a worker this replica does not know
  stale,            // older than it can still say anything (a load report past peer_timeout)
  queue_full,       // this replica's publishing queue was full
  engine_down,      // the engine could not be reached when it was to be published
};
std::string_view to_string(DropReason reason);
inline constexpr DropReason kDropReasons[] = {
    DropReason::malformed, DropReason::unknown_version, DropReason::unknown_model, DropReason::unknown_worker,
    DropReason::stale,     DropReason::queue_full,      DropReason::engine_down};

struct TurnMessage {
  std::string_view model;
  std::string_view key;
  std::string_view key_source;
  std::uint64_t number = 0;
  std::string_view worker;
  std::string_view prefill_worker;  // empty: prefilled on `worker`
  policy::Reason reason = policy::Reason::new_session;
  std::optional<policy::Reason> prefill;
  std::uint32_t input_tokens = 0;
  std::uint32_t predicted_cached_tokens = 0;
  std::optional<double> kv_usage;  // 0..1, to the permille
  bool retry = false;              // replaces the session's last turn (a retry), not a new one
};

struct OutcomeMessage {
  std::string_view model;
  std::string_view key;
  std::uint64_t number = 0;
  int status = 0;
  std::optional<std::uint32_t> cached_tokens;
  std::optional<std::uint32_t> prompt_tokens;
  std::optional<double> ttft_ms;  // to the microsecond
  std::optional<double> decode_ms;
};

// assumed (the blocks were routed to the worker) or withdrawn (that
// request did not run there).
struct BlocksMessage {
  std::string_view model;
  std::string_view worker;
  std::uint64_t ticket = 0;  // the sender's own numbering
  std::vector<std::uint64_t> blocks;
};

struct FinishedMessage {
  std::string_view model;
  std::string_view worker;
  std::uint64_t ticket = 0;
};

struct WorkerLoad {
  std::string_view worker;
  std::uint32_t in_flight = 0;
  std::uint64_t pending_prefill_tokens = 0;
  std::uint32_t pending_requests = 0;
  std::uint64_t active_tokens = 0;
  bool operator==(const WorkerLoad&) const = default;
};

struct LoadMessage {
  std::vector<WorkerLoad> workers;
};

// What an answer taught of a worker's costs (route/cost_sample.hpp), times
// to the microsecond.
struct LearnedMessage {
  std::string_view model;
  std::string_view worker;
  route::CostSample sample;
};

// A session's turn was answered whole: the tokens its engine generated
// (when it said). A slot engine's next turn expects the slot to hold them
// (policy/slot_reuse.hpp), whichever replica routes it.
struct AnsweredMessage {
  std::string_view key;
  std::uint64_t number = 0;
  std::optional<std::uint32_t> answer_tokens;
};

struct Message {
  MessageKind kind = MessageKind::load;
  std::uint64_t sent_unix_ms = 0;
  std::string_view from;          // the sender's replica id
  std::uint64_t incarnation = 0;  // the sender's process (random at its start)
  std::variant<TurnMessage, OutcomeMessage, BlocksMessage, FinishedMessage, LoadMessage, LearnedMessage,
               AnsweredMessage>
      body;
};

// Each appends one whole message to `out` (out is not cleared).
void encode_header(std::string& out, MessageKind kind, std::uint64_t sent_unix_ms, std::string_view from,
                   std::uint64_t incarnation);
void encode(std::string& out, const TurnMessage& turn);
void encode(std::string& out, const OutcomeMessage& outcome);
void encode(std::string& out, const BlocksMessage& blocks);  // no vector needed: see encode_blocks
void encode_blocks(std::string& out, std::string_view model, std::string_view worker, std::uint64_t ticket,
                   const std::uint64_t* blocks, std::size_t count);
void encode(std::string& out, const FinishedMessage& finished);
void encode(std::string& out, const LoadMessage& load);
void encode(std::string& out, const LearnedMessage& learned);
void encode(std::string& out, const AnsweredMessage& answered);

// `bytes` must outlive the message (its text fields view them).
Result<Message, DropReason> decode(std::string_view bytes);

}  // namespace kvgate::cluster
