#pragma once
// The protocol logic of one worker's KV-event stream, without sockets or
// clocks: live batches, replay frames and ticks go in, the actions the
// shell (feed.cpp, which owns the ZMQ sockets) must carry out come out, in
// order. vLLM's protocol (vllm/distributed/kv_events.py): every batch has a
// sequence number one above the previous; a subscriber that misses some
// asks the replay (ROUTER) socket for everything from a number on and gets
// the buffered batches, then an end marker.
//
// Rules:
// - next in line: apply;
// - a duplicate or older number, or anything but the next one after the
//   connection dropped: the engine restarted (its cache is empty): reset,
//   then take the batch as a first one;
// - a gap: hold the live batches back, request a replay from the first
//   missing number, apply the replayed ones in order, then the held ones;
//   a replay that misses any batch (buffer too short), ends early, times out
//   or holds too much fails: the worker is stale (its confirmed blocks
//   forgotten, approximate routing) for approximate_ttl;
// - no replay socket: a gap marks the worker stale at once;
// - the first batch after start-up numbered above 0: a replay from 0 (what
//   the engine stored before kvgate connected); failing it only means some
//   old blocks stay unknown (under-reporting), so it does not mark stale;
// - silence: blocks were routed to the worker but no batch came for
//   silence_after: the stream is flagged silent until a batch arrives.
#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <vector>

namespace kvgate::kv_events {

struct SequenceSettings {
  bool replay_available = false;  // a replay endpoint is configured
  std::uint64_t replay_timeout_ms = 1'000;
  std::uint64_t approximate_ttl_ms = 600'000;  // how long a stale worker stays stale
  std::uint64_t silence_after_ms = 10'000;
  std::size_t max_held_batches = 100'000;  // live batches held during a replay; beyond: the replay fails
};

// vLLM's end-of-replay marker: a sequence number of eight 0xFF bytes.
inline constexpr std::uint64_t kEndOfReplay = UINT64_MAX;

struct EventMessage {
  std::uint64_t sequence = 0;
  std::string payload;  // the batch, MessagePack (decoded by the shell)
};

struct SequenceAction {
  enum class Kind {
    apply,                 // decode and apply `message`
    gap,                   // `expected` was due, `got` arrived
    engine_restarted,      // drop the worker's entries (before the apply that follows)
    request_replay,        // send a replay request from `expected`
    replay_finished,       // `closed` says whether every batch was recovered; `late_join` as started
    reopen_replay_socket,  // drop whatever a slow engine still sends for an abandoned replay
    stale_started,         // forget the confirmed blocks; approximate mode
    stale_ended,
    silent_started,  // routed blocks but no batch for silence_after
    silent_ended,
  };
  Kind kind;
  EventMessage message;        // apply
  std::uint64_t expected = 0;  // gap, request_replay
  std::uint64_t got = 0;       // gap
  bool closed = false;         // replay_finished
  bool late_join = false;      // replay_finished
  bool timed_out = false;      // replay_finished
};

using SequenceActions = std::vector<SequenceAction>;

class SequenceTracker {
 public:
  explicit SequenceTracker(SequenceSettings settings, std::uint64_t now_ms);

  void update(SequenceSettings settings) { settings_ = settings; }

  SequenceActions on_live(EventMessage message, std::uint64_t now_ms);
  // A frame from the replay socket: a batch or the end marker.
  SequenceActions on_replay(EventMessage message, std::uint64_t now_ms);
  // The subscriber lost its connection (a restart may follow).
  void on_disconnected() { disconnected_since_last_ = true; }
  // Another source said the engine restarted (its metrics' counters went
  // down): whatever sequence comes next starts the stream again, even one
  // right after the last (the restarted engine's first batches may have
  // been lost before its publisher was connected). A replay under way ends.
  void on_engine_restarted() {
    last_sequence_.reset();
    disconnected_since_last_ = false;
    replaying_ = false;
    held_.clear();
  }
  // `new_blocks` were routed to the worker (routing-time inserts).
  void on_routed(std::uint64_t new_blocks, std::uint64_t now_ms);
  SequenceActions on_tick(std::uint64_t now_ms);

  [[nodiscard]] std::optional<std::uint64_t> last_sequence() const { return last_sequence_; }
  [[nodiscard]] bool replaying() const { return replaying_; }
  [[nodiscard]] bool stale() const { return stale_; }
  [[nodiscard]] bool silent() const { return silent_; }

 private:
  void start_replay(std::uint64_t from, bool late_join, std::uint64_t now_ms, SequenceActions& actions);
  void finish_replay(bool ended, bool timed_out, std::uint64_t now_ms, SequenceActions& actions);
  void apply(EventMessage message, std::uint64_t now_ms, SequenceActions& actions);
  void mark_stale(std::uint64_t now_ms, SequenceActions& actions);

  SequenceSettings settings_;
  std::optional<std::uint64_t> last_sequence_;
  bool disconnected_since_last_ = false;
  bool replaying_ = false;
  bool replay_late_join_ = false;
  bool replay_missed_ = false;
  std::uint64_t replay_next_ = 0;
  std::uint64_t replay_deadline_ms_ = 0;
  std::deque<EventMessage> held_;
  bool stale_ = false;
  std::uint64_t stale_until_ms_ = 0;
  bool silent_ = false;
  std::uint64_t last_event_ms_ = 0;
  std::uint64_t unreported_blocks_ = 0;
  std::uint64_t unreported_since_ms_ = 0;
};

}  // namespace kvgate::kv_events
