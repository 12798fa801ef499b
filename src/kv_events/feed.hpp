#pragma once
// One worker's KV-event stream inside the ingestion thread: its sockets, its
// sequence tracking and replay, and its routing-time inserts. Owned and used
// by the ingestion thread only (see ingestion.hpp for the rules).
#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <vector>
#include <zmq.hpp>

#include "kvgate/kv_events/ingestion.hpp"

namespace kvgate::kv_events {

struct FeedSettings {
  std::int64_t speculative_ttl_ms = 2'000;
  std::int64_t approximate_ttl_ms = 600'000;
  std::int64_t replay_timeout_ms = 1'000;
  std::int64_t silence_after_ms = 10'000;
};

class Feed {
 public:
  Feed(zmq::context_t& context, obs::Metrics& metrics, WorkerFeed config, FeedSettings settings, std::uint64_t now_ms);
  ~Feed();
  Feed(const Feed&) = delete;
  Feed& operator=(const Feed&) = delete;

  [[nodiscard]] bool same_source(const WorkerFeed& other) const;
  void update(const WorkerFeed& other, FeedSettings settings);
  void add_poll_items(std::vector<zmq::pollitem_t>& items);
  // Takes what the sockets have (never blocks).
  void receive(std::uint64_t now_ms);
  void assume(std::span<const BlockHash> blocks, std::uint64_t now_ms);
  void tick(std::uint64_t now_ms);
  void drop_entries();

 private:
  struct Message {
    std::uint64_t sequence = 0;
    std::string payload;
  };
  enum class Frames { ok, malformed, end_of_replay };

  void open_replay_socket();
  void receive_monitor();
  void receive_live(std::uint64_t now_ms);
  void receive_replay(std::uint64_t now_ms);
  void on_live(Message message, std::uint64_t now_ms);
  void start_replay(std::uint64_t from, bool late_join, std::uint64_t now_ms);
  void finish_replay(bool ended, std::uint64_t now_ms);
  // Applies a batch that comes next in sequence order (live or replayed).
  void apply_in_order(const Message& message, std::uint64_t now_ms);
  void apply(const Message& message, std::uint64_t now_ms);
  void engine_restarted();
  void mark_stale(std::uint64_t now_ms);
  void publish_counts();
  [[nodiscard]] bool events_on() const { return !config_.events_endpoint.empty(); }
  [[nodiscard]] std::uint64_t capacity_blocks() const;

  zmq::context_t& context_;
  obs::Metrics& metrics_;
  WorkerFeed config_;
  FeedSettings settings_;
  workers::EventStreamStatus& status_;
  std::string worker_id_;
  std::optional<zmq::socket_t> subscriber_;
  std::optional<zmq::socket_t> monitor_;
  std::optional<zmq::socket_t> replay_;

  std::optional<std::uint64_t> last_sequence_;
  bool disconnected_since_last_ = false;
  // Replay in progress: the next sequence wanted, the live batches held back
  // meanwhile, and whether a miss marks the worker stale.
  bool replaying_ = false;
  bool replay_late_join_ = false;
  bool replay_missed_ = false;
  std::uint64_t replay_next_ = 0;
  std::uint64_t replay_deadline_ms_ = 0;
  std::deque<Message> held_;

  std::uint64_t stale_until_ms_ = 0;
  std::uint64_t last_event_ms_ = 0;
  // Blocks routed here that the engine should have reported storing, and
  // since when (silence detection).
  std::uint64_t unreported_blocks_ = 0;
  std::uint64_t unreported_since_ms_ = 0;

  prometheus::Counter* stored_events_;
  prometheus::Counter* removed_events_;
  prometheus::Counter* cleared_events_;
  prometheus::Counter* unknown_events_;
  prometheus::Counter* malformed_events_;
};

}  // namespace kvgate::kv_events
