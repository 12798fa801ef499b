#pragma once
// One worker's KV-event stream inside the ingestion thread: a thin adapter
// between its ZMQ sockets and the pure SequenceTracker (sequence_tracker.hpp
// has the protocol rules), which carries out the tracker's actions on the
// worker's index, status atomics, metrics and log; and its routing-time
// inserts. Owned and used by the ingestion thread only (ingestion.hpp).
#include <cstdint>
#include <optional>
#include <string>
#include <vector>
#include <zmq.hpp>

#include "kvgate/kv_events/ingestion.hpp"
#include "kvgate/kv_events/sequence_tracker.hpp"

namespace kvgate::kv_events {

struct FeedSettings {
  std::int64_t speculative_ttl_ms = 2'000;
  std::int64_t approximate_ttl_ms = 600'000;
  std::int64_t replay_timeout_ms = 1'000;
  std::int64_t silence_after_ms = 10'000;
};

class Feed {
 public:
  Feed(zmq::context_t& context, IndexStats& stats, WorkerFeed config, FeedSettings settings, std::uint64_t now_ms);
  ~Feed();
  Feed(const Feed&) = delete;
  Feed& operator=(const Feed&) = delete;

  [[nodiscard]] bool same_source(const WorkerFeed& other) const;
  void update(const WorkerFeed& other, FeedSettings settings);
  void add_poll_items(std::vector<zmq::pollitem_t>& items);
  // Takes what the sockets have (never blocks).
  void receive(std::uint64_t now_ms);
  // A worker whose engine publishes to the listener (kv_events.listen): a
  // message the listener received under one of its addresses.
  [[nodiscard]] bool on_listener() const { return config_.events_endpoint == kListenerEndpoint; }
  [[nodiscard]] const std::vector<std::string>& listener_addresses() const { return config_.listener_addresses; }
  void deliver(std::vector<zmq::message_t>& frames, std::uint64_t now_ms);
  void assume(std::span<const BlockHash> blocks, std::uint64_t now_ms, std::uint64_t ticket);
  void withdraw(std::span<const BlockHash> blocks, std::uint64_t ticket, std::uint64_t now_ms);
  void finish(std::uint64_t ticket, std::uint64_t now_ms, std::optional<std::uint32_t> reported_blocks);
  void tick(std::uint64_t now_ms);
  void drop_entries();

 private:
  // Tells the worker's caches how its engine keeps prompts (blocks or slots).
  void configure_cache_model();
  void open_replay_socket();
  void receive_monitor();
  void receive_live(std::uint64_t now_ms);
  void live_message(std::vector<zmq::message_t>& frames, std::uint64_t now_ms);
  void receive_replay(std::uint64_t now_ms);
  void perform(SequenceActions actions, std::uint64_t now_ms);
  void apply(const EventMessage& message, std::uint64_t now_ms);
  void drop_unknown_adapters(std::vector<Event>& events);
  void send_replay_request(std::uint64_t from);
  void finished_replay(const SequenceAction& finished);
  void publish_counts(std::uint64_t now_ms);
  [[nodiscard]] bool events_on() const { return !config_.events_endpoint.empty(); }
  [[nodiscard]] std::uint64_t capacity_blocks() const;
  [[nodiscard]] SequenceSettings sequence_settings() const;

  zmq::context_t& context_;
  IndexStats& stats_;
  WorkerFeed config_;
  FeedSettings settings_;
  workers::EventStreamStatus& status_;
  std::string worker_id_;
  std::optional<zmq::socket_t> subscriber_;
  std::optional<zmq::socket_t> monitor_;
  std::optional<zmq::socket_t> replay_;
  SequenceTracker tracker_;
  // The engine restarts the scraper had seen at the last tick: a worker
  // without events loses what kvgate modelled of its cache at each one.
  std::uint64_t engine_restarts_seen_ = 0;
  // The events showed a restart since the metrics last did (a worker on the
  // listener then need not act on the metrics' sign of the same restart).
  bool restart_seen_in_events_ = false;
  bool unknown_group_logged_ = false;    // a cache group kvgate does not model is logged once per worker
  bool unknown_adapter_logged_ = false;  // so is an adapter the model does not list

  prometheus::Counter* stored_events_;
  prometheus::Counter* removed_events_;
  prometheus::Counter* cleared_events_;
  prometheus::Counter* unknown_events_;
  prometheus::Counter* malformed_events_;
};

}  // namespace kvgate::kv_events
