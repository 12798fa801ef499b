#pragma once
// What the gateway remembers of each conversation, keyed by its session key
// (from the sources of sessions.key_from): the worker its last turn went
// to, when it was last seen, how long its last prompt was, where its key
// came from, and its last few turns as the seed's practical test logs them:
// worker, input tokens, predicted and engine-reported cached tokens,
// prefill time (TTFT), decode time and the worker's KV usage when chosen.
//
// Sub-agents and forks: a session whose first prompt continues another
// live session's history (past that session's own first prompt: more than
// a preamble every session shares) is recorded as its child. The link is
// found from the prompts alone, through anchors: each session's block
// hashes at positions 2^k - 1 and its last block, owned by the first live
// session that sent them. No client header is needed.
//
// Bounded: at most max_sessions entries (least recently used evicted
// first), at most turns_kept turns each, at most kAnchorsPerSession anchors
// in all per session the table may hold; keys longer than kMaxKeyBytes are stored as a hash of
// themselves. Time is an input (milliseconds since the Unix epoch); nothing
// here reads a clock.
//
// Threading: sharded by key hash, a mutex per shard held for one lookup or
// update (no allocation under the lock except a new entry's); the anchors
// in shards of their own by block hash, likewise. A commit takes these
// locks one after another, never two at once. Every I/O thread and the
// admin thread may call any method.
#include <array>
#include <atomic>
#include <cstdint>
#include <deque>
#include <list>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <absl/container/flat_hash_map.h>

#include "kvgate/policy/reason.hpp"

namespace kvgate::route {

struct SessionLimits {
  std::uint32_t max_sessions = 65'536;
  std::uint64_t idle_ttl_ms = 1'800'000;
  std::uint32_t turns_kept = 8;
};

// Longer keys are replaced by "xxh3:" and a 128-bit hash of the key (a
// client cannot make the table hold arbitrarily large strings).
inline constexpr std::size_t kMaxKeyBytes = 256;
std::string session_table_key(std::string_view key);

// One turn as routed, then completed.
struct SessionTurn {
  std::uint64_t number = 0;  // 1-based, counted since the session started
  std::uint64_t at_ms = 0;   // when routed, on the caller's clock (the gateway's: monotonic)
  std::string worker;        // worker ids are short: no allocation (small-string storage)
  // The worker's position in its model's routing table when routed: a hint
  // for the next turn's lookup, trusted only where that position still
  // holds `worker` (a reload or discovery may have moved it).
  std::uint32_t worker_position = 0;
  policy::Reason reason = policy::Reason::new_session;
  // A disaggregated model: where the prefill ran (empty: on `worker`, the
  // decoder) and why.
  std::string prefill_worker;
  std::optional<policy::Reason> prefill;
  std::uint32_t input_tokens = 0;
  std::uint32_t predicted_cached_tokens = 0;
  // The worker's KV-cache usage (0..1) its engine last reported, when chosen.
  std::optional<double> kv_usage;
  // Filled when the response ends with the engine's usage.
  std::optional<std::uint32_t> cached_tokens;
  std::optional<std::uint32_t> prompt_tokens;  // the engine's count
  std::optional<double> ttft_ms;
  std::optional<double> decode_ms;  // first token to the answer's end
  int status = 0;                   // 0: not finished yet
};

// What routing needs of a session (a copy, taken under the shard lock).
struct SessionState {
  std::string worker;                 // the previous turn's worker
  std::uint32_t worker_position = 0;  // SessionTurn::worker_position
  std::uint64_t turns = 0;
  std::uint64_t last_seen_ms = 0;
  std::uint32_t last_input_tokens = 0;
  bool expired = false;  // idle longer than idle_ttl: the next turn starts a new session
  // The tokens the engine generated for the previous turn (nullopt: its
  // answer not read yet, or not answered).
  std::optional<std::uint32_t> last_answer_tokens;
  // When the previous turn's answer was read whole (the caller's clock;
  // nullopt: not yet, or not answered).
  std::optional<std::uint64_t> last_answered_ms;
};

struct SessionDetail {
  std::string key;
  std::string key_source;  // the source of its last turn's key ("header:x-session-id")
  std::string parent;      // the session it continues (sub-agent, fork); empty: none
  std::uint64_t children = 0;
  SessionState state;
  std::uint64_t started_ms = 0;
  std::vector<SessionTurn> turns;  // the last turns_kept, oldest first
};

class SessionTable {
 public:
  explicit SessionTable(SessionLimits limits = {});

  // New bounds (reload); entries beyond a smaller cap go at the next insert.
  void set_limits(SessionLimits limits);

  // No side effects: a dry run (/debug/route) and the real request see the
  // same state.
  [[nodiscard]] std::optional<SessionState> find(std::string_view key, std::uint64_t now_ms) const;

  // Records a routed turn; returns its number. An expired entry starts over
  // (turn 1). `same_request`: a retry of the session's last turn, which
  // replaces that turn's worker and reason instead of adding a turn.
  // `key_source`: where the request found the key (kept per session).
  // `blocks`: the prompt's block hashes (its lineage: a first turn that
  // continues another live session's history becomes its child).
  std::uint64_t commit_turn(std::string_view key, SessionTurn turn, std::uint64_t now_ms, bool same_request = false,
                            std::string_view key_source = {}, std::span<const std::uint64_t> blocks = {});

  // A turn another replica of the cluster committed (cluster/), numbered
  // by that replica, routed at turn.at_ms (this table's clock; at most
  // now_ms). Applied when it is past the session's last turn (the session
  // jumps to its number), or `retry` of the last one; a number the table
  // already holds is a duplicate or a concurrent turn and is not applied.
  // Returns whether it was applied.
  bool apply_peer_turn(std::string_view key, SessionTurn turn, std::uint64_t now_ms, bool retry,
                       std::string_view key_source);

  // Completes turn `number` of the session, if the table still has it.
  struct Outcome {
    int status = 0;
    std::optional<std::uint32_t> cached_tokens;
    std::optional<std::uint32_t> prompt_tokens;
    std::optional<double> ttft_ms;
    std::optional<double> decode_ms;
  };
  void record_outcome(std::string_view key, std::uint64_t number, const Outcome& outcome);
  // Turn `number`'s answer was read whole at `now_ms`: when, and the
  // tokens its engine generated (when it said). Kept while it is the
  // session's last turn, as SessionState::last_answered_ms and
  // last_answer_tokens; called as the engine finishes, so the client's next
  // turn already finds them.
  void record_answer(std::string_view key, std::uint64_t number, std::optional<std::uint32_t> answer_tokens,
                     std::uint64_t now_ms);

  [[nodiscard]] std::optional<SessionDetail> detail(std::string_view key, std::uint64_t now_ms) const;

  // The `limit` sessions seen most recently (within idle_ttl), newest first,
  // each with its last turn: for the status page (a partial scan, at most
  // `limit` entries per shard).
  struct Summary {
    SessionState state;
    std::string key;
    std::string key_source;
    std::string parent;
    std::uint64_t started_ms = 0;
    std::optional<SessionTurn> last_turn;
  };
  [[nodiscard]] std::vector<Summary> recent(std::size_t limit, std::uint64_t now_ms) const;

  [[nodiscard]] std::size_t size() const;
  // Anchors kept for finding parents (bounded; for tests and /metrics).
  [[nodiscard]] std::size_t anchors() const;
  // Entries seen within idle_ttl of now (a scan: for /metrics, not per request).
  [[nodiscard]] std::size_t active(std::uint64_t now_ms) const;

 private:
  struct Entry {
    std::string key;
    std::uint64_t started_ms = 0;
    std::uint64_t last_seen_ms = 0;
    std::uint64_t turns = 0;
    std::uint32_t last_input_tokens = 0;
    std::string worker;
    std::uint32_t worker_position = 0;
    std::string key_source;  // assigned per turn: its capacity is reused
    std::deque<SessionTurn> recent;
    std::string parent;                               // set at the first turn
    std::uint64_t children = 0;                       // sessions that named this one their parent
    std::uint32_t first_turn_blocks = 0;              // its first prompt's length in blocks
    std::optional<std::uint32_t> last_answer_tokens;  // SessionState's
    std::optional<std::uint64_t> last_answered_ms;    // SessionState's
  };
  // An anchor's owner: the first live session that sent the block, by the
  // hash of its stored key (Shard::by_hash finds the entry).
  struct AnchorOwner {
    std::uint64_t key_hash = 0;
    std::uint32_t first_turn_blocks = 0;
    std::uint64_t seen_ms = 0;  // the owner's last turn that sent it
  };
  struct AnchorShard {
    mutable std::mutex mutex;
    absl::flat_hash_map<std::uint64_t, AnchorOwner> owners;  // block hash -> owner
  };
  // Anchors kept in all, per session the table may hold (about 40 bytes
  // each); beyond, expired owners go first, then new anchors are not kept.
  static constexpr std::size_t kAnchorsPerSession = 4;
  struct Shard {
    mutable std::mutex mutex;
    std::list<Entry> lru;                                                      // most recently used first
    absl::flat_hash_map<std::string_view, std::list<Entry>::iterator> by_key;  // views the Entry's key
    absl::flat_hash_map<std::uint64_t, std::list<Entry>::iterator> by_hash;    // XXH3-64 of the key
  };
  static constexpr std::size_t kShards = 16;

  Shard& shard_for(std::string_view stored_key) const;
  // Under the shard's lock: a new entry (least recently used ones evicted
  // down to `capacity`), and an expired one made a new session.
  static std::list<Entry>::iterator insert_entry(Shard& shard, std::string_view stored, std::uint64_t key_hash,
                                                 std::uint64_t now_ms, std::size_t capacity);
  static void start_over(Entry& entry, std::uint64_t now_ms);
  // Calls visit(Entry*) (null: no such key) under the shard's lock (the
  // shards are mutable: a const lookup still locks).
  template <class Visit>
  auto with_entry(std::string_view key, Visit visit) const;
  [[nodiscard]] SessionState state_of(const Entry& entry, std::uint64_t now_ms) const;
  [[nodiscard]] std::size_t shard_capacity() const;

  // The live session whose history `blocks` continues, if any (not
  // `stored_key` itself); registers the prompt's anchors for `stored_key`.
  std::optional<std::string> find_parent(std::uint64_t key_hash, std::span<const std::uint64_t> blocks,
                                         std::uint64_t now_ms) const;
  void register_anchors(std::uint64_t key_hash, std::span<const std::uint64_t> blocks, std::uint32_t first_turn_blocks,
                        std::uint64_t now_ms);
  AnchorShard& anchor_shard_for(std::uint64_t block) const;

  mutable std::array<Shard, kShards> shards_;
  mutable std::array<AnchorShard, kShards> anchors_;
  std::atomic<std::uint32_t> max_sessions_;
  std::atomic<std::uint64_t> idle_ttl_ms_;
  std::atomic<std::uint32_t> turns_kept_;
};

}  // namespace kvgate::route
