#include "kv_publisher.hpp"

#include <array>
#include <vector>
#include <zmq.hpp>

namespace kvgate::sim {
namespace {

std::array<char, 8> big_endian(std::uint64_t value) {
  std::array<char, 8> bytes{};
  for (std::size_t byte = 0; byte < 8; ++byte) {
    bytes[byte] = static_cast<char>((value >> ((7 - byte) * 8)) & 0xff);
  }
  return bytes;
}

constexpr std::uint64_t kEndOfReplay = UINT64_MAX;  // eight 0xFF bytes, empty payload

}  // namespace

KvPublisher::KvPublisher(const PublisherOptions& options)
    : context_(std::make_unique<zmq::context_t>(1)),
      socket_(std::make_unique<zmq::socket_t>(*context_, zmq::socket_type::pub)),
      replay_capacity_(options.replay_batches),
      replay_with_topic_(options.replay_with_topic),
      topic_(options.topic) {
  socket_->set(zmq::sockopt::linger, 0);
  socket_->bind(options.endpoint);
  // Read before any connect: ZMQ's last endpoint is the last bound or dialled.
  bound_endpoint_ = socket_->get(zmq::sockopt::last_endpoint);
  if (!options.connect_endpoint.empty()) {
    socket_->connect(options.connect_endpoint);  // ZMQ dials in the background and redials
  }
  if (!options.replay_endpoint.empty()) {
    replay_ = std::make_unique<zmq::socket_t>(*context_, zmq::socket_type::router);
    replay_->set(zmq::sockopt::linger, 0);
    replay_->bind(options.replay_endpoint);
  }
}

KvPublisher::~KvPublisher() = default;

std::string KvPublisher::endpoint() const {
  return bound_endpoint_;
}

std::string KvPublisher::replay_endpoint() const {
  return replay_ ? replay_->get(zmq::sockopt::last_endpoint) : std::string();
}

void KvPublisher::publish(std::string payload) {
  auto sequence = big_endian(next_sequence_);
  if (drop_remaining_ > 0) {
    --drop_remaining_;
  } else {
    // PUB never blocks: a slow subscriber loses messages (it sees the gap by
    // sequence number and asks for a replay); the engine does not slow down.
    socket_->send(zmq::buffer(topic_), zmq::send_flags::sndmore | zmq::send_flags::dontwait);
    socket_->send(zmq::buffer(sequence), zmq::send_flags::sndmore | zmq::send_flags::dontwait);
    socket_->send(zmq::buffer(payload), zmq::send_flags::dontwait);
  }
  buffer_.emplace_back(next_sequence_, std::move(payload));
  if (buffer_.size() > replay_capacity_) {
    buffer_.pop_front();
  }
  ++next_sequence_;
}

void KvPublisher::restart() {
  next_sequence_ = 0;
  buffer_.clear();
  drop_remaining_ = 0;
}

int KvPublisher::replay_fd() const {
  return replay_ ? replay_->get(zmq::sockopt::fd) : -1;
}

void KvPublisher::serve_replay() {
  if (!replay_) {
    return;
  }
  // ZMQ_FD is edge-like: drain every pending request before waiting again.
  while (replay_->get(zmq::sockopt::events) & ZMQ_POLLIN) {
    std::vector<zmq::message_t> frames;
    zmq::message_t frame;
    do {
      if (!replay_->recv(frame, zmq::recv_flags::dontwait)) {
        break;
      }
      frames.emplace_back(std::move(frame));
    } while (frames.back().more());
    // [identity, "", start sequence (8 bytes)]; anything else is ignored.
    if (frames.size() != 3 || frames[2].size() != 8) {
      continue;
    }
    std::uint64_t start = 0;
    for (auto byte : frames[2].to_string_view()) {
      start = (start << 8) | static_cast<unsigned char>(byte);
    }
    answer_replay(frames[0].to_string(), start);
  }
}

void KvPublisher::answer_replay(const std::string& identity, std::uint64_t start) {
  auto send_batch = [&](std::uint64_t sequence, const std::string& payload) {
    auto bytes = big_endian(sequence);
    replay_->send(zmq::buffer(identity), zmq::send_flags::sndmore | zmq::send_flags::dontwait);
    replay_->send(zmq::const_buffer("", 0), zmq::send_flags::sndmore | zmq::send_flags::dontwait);
    if (replay_with_topic_) {
      replay_->send(zmq::buffer(topic_), zmq::send_flags::sndmore | zmq::send_flags::dontwait);
    }
    replay_->send(zmq::buffer(bytes), zmq::send_flags::sndmore | zmq::send_flags::dontwait);
    replay_->send(zmq::buffer(payload), zmq::send_flags::dontwait);
  };
  for (const auto& [sequence, payload] : buffer_) {
    if (sequence >= start) {
      send_batch(sequence, payload);
    }
  }
  send_batch(kEndOfReplay, std::string());
}

}  // namespace kvgate::sim
