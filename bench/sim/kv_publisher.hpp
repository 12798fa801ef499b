#pragma once
// Publishes KV-event batches the way vLLM's ZmqEventPublisher does: a PUB
// socket, three frames per batch [topic, sequence (8-byte big-endian),
// msgpack payload], sequence starting at 0 and +1 per batch; and, when a
// replay endpoint is set, a ROUTER socket serving vLLM's replay protocol
// from a bounded buffer of recent batches. Used from the simulator's one
// I/O thread only (ZMQ sockets are not thread-safe).
#include <cstdint>
#include <deque>
#include <memory>
#include <string>

namespace zmq {
class context_t;
class socket_t;
}  // namespace zmq

namespace kvgate::sim {

struct PublisherOptions {
  std::string endpoint;
  std::string replay_endpoint;  // empty: no replay socket
  std::size_t replay_batches = 10'000;
  // Replies ["", topic, seq, payload] (newer vLLM) instead of ["", seq, payload].
  bool replay_with_topic = true;
  // The first frame of every batch (vLLM's `topic`, empty by default; llm-d
  // deployments set kv@<pod address:port>@<model>, which names the replica
  // to a subscriber that binds one socket for many engines).
  std::string topic;
  // Addresses the PUB socket also dials, as a vLLM publisher pointed at a
  // subscriber that binds (llm-d's picker); empty: bound only.
  std::string connect_endpoint;
};

class KvPublisher {
 public:
  explicit KvPublisher(const PublisherOptions& options);  // throws zmq::error_t at start-up
  ~KvPublisher();

  void publish(std::string payload);
  // The bound address; differs from the configured one for "tcp://host:*".
  [[nodiscard]] std::string endpoint() const;
  [[nodiscard]] std::string replay_endpoint() const;

  // Replay socket: its ZMQ_FD for readiness waits, and the handler that
  // answers every pending request without blocking. -1 when replay is off.
  [[nodiscard]] int replay_fd() const;
  void serve_replay();

  // Faults: the next `count` batches are buffered for replay but not sent
  // (subscribers see a sequence gap); restart() starts over at sequence 0
  // with an empty buffer, as a restarted engine does.
  void drop_next(std::uint32_t count) { drop_remaining_ = count; }
  void restart();
  // The sequence number the next batch gets (batches dropped by the fault
  // count too): tests wait for a subscriber to reach next_sequence() - 1.
  [[nodiscard]] std::uint64_t next_sequence() const { return next_sequence_; }

 private:
  void answer_replay(const std::string& identity, std::uint64_t start);

  std::unique_ptr<zmq::context_t> context_;
  std::unique_ptr<zmq::socket_t> socket_;
  std::unique_ptr<zmq::socket_t> replay_;
  std::uint64_t next_sequence_ = 0;
  std::size_t replay_capacity_;
  bool replay_with_topic_;
  std::string topic_;
  std::string bound_endpoint_;
  std::uint32_t drop_remaining_ = 0;
  std::deque<std::pair<std::uint64_t, std::string>> buffer_;
};

}  // namespace kvgate::sim
