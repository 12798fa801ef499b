#include "kv_publisher.hpp"

#include <array>
#include <zmq.hpp>

namespace kvgate::sim {

KvPublisher::KvPublisher(const std::string& endpoint, std::size_t replay_batches)
    : context_(std::make_unique<zmq::context_t>(1)),
      socket_(std::make_unique<zmq::socket_t>(*context_, zmq::socket_type::pub)),
      replay_capacity_(replay_batches) {
  socket_->set(zmq::sockopt::linger, 0);
  socket_->bind(endpoint);
}

KvPublisher::~KvPublisher() = default;

std::string KvPublisher::endpoint() const {
  return socket_->get(zmq::sockopt::last_endpoint);
}

void KvPublisher::publish(std::string payload) {
  std::array<char, 8> sequence{};
  for (int byte = 0; byte < 8; ++byte) {
    sequence[static_cast<std::size_t>(byte)] = static_cast<char>((next_sequence_ >> ((7 - byte) * 8)) & 0xff);
  }
  // PUB never blocks: a slow subscriber loses messages (it detects the gap
  // by sequence number), the engine does not slow down.
  socket_->send(zmq::const_buffer("", 0), zmq::send_flags::sndmore | zmq::send_flags::dontwait);
  socket_->send(zmq::buffer(sequence), zmq::send_flags::sndmore | zmq::send_flags::dontwait);
  socket_->send(zmq::buffer(payload), zmq::send_flags::dontwait);
  replay_.emplace_back(next_sequence_, std::move(payload));
  if (replay_.size() > replay_capacity_) {
    replay_.pop_front();
  }
  ++next_sequence_;
}

}  // namespace kvgate::sim
