#pragma once
// Publishes KV-event batches the way vLLM's ZmqEventPublisher does: a PUB
// socket, three frames per batch [topic, sequence (8-byte big-endian),
// msgpack payload], sequence starting at 0 and +1 per batch. Keeps the last
// batches for the replay protocol. Called from the simulator's one I/O
// thread only (ZMQ sockets are not thread-safe).
#include <cstdint>
#include <deque>
#include <memory>
#include <string>

namespace zmq {
class context_t;
class socket_t;
}  // namespace zmq

namespace kvgate::sim {

class KvPublisher {
 public:
  KvPublisher(const std::string& endpoint, std::size_t replay_batches);  // throws zmq::error_t at start-up
  ~KvPublisher();

  void publish(std::string payload);
  [[nodiscard]] std::uint64_t next_sequence() const { return next_sequence_; }
  // The bound address; differs from the configured one for "tcp://host:*".
  [[nodiscard]] std::string endpoint() const;

 private:
  std::unique_ptr<zmq::context_t> context_;
  std::unique_ptr<zmq::socket_t> socket_;
  std::uint64_t next_sequence_ = 0;
  std::size_t replay_capacity_;
  std::deque<std::pair<std::uint64_t, std::string>> replay_;
};

}  // namespace kvgate::sim
