#pragma once
// The bounded queue between the request path and the publisher thread:
// a fixed number of message buffers, each reused (cleared, its capacity
// kept), so a warm queue does not allocate. A producer claims a free
// buffer under a short lock, encodes into it, and hands it over under the
// lock again; it never waits: when every buffer is taken the message is
// dropped and push() says so. Buffers are reused last-freed first, so the
// few a steady flow needs stay warm. The publisher takes every
// ready buffer at once, sends them, and gives them back.
//
// Threading: push() from any thread; take()/give_back() from the one
// publisher thread.
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <span>
#include <string>
#include <vector>

namespace kvgate::cluster {

class Outbox {
 public:
  explicit Outbox(std::size_t capacity);

  // Calls encode(std::string& buffer) on an empty buffer, outside the lock
  // (the buffer is the caller's until it is ready); false when full.
  template <class Encode>
  bool push(Encode encode) {
    std::uint32_t slot = 0;
    {
      std::lock_guard lock(mutex_);
      if (free_.empty()) {
        return false;
      }
      slot = free_.back();
      free_.pop_back();
    }
    auto& buffer = buffers_[slot];
    buffer.clear();
    encode(buffer);
    {
      std::lock_guard lock(mutex_);
      ready_.push_back(slot);
    }
    wake_.notify_one();
    return true;
  }

  // Waits until something is ready or `timeout` passed; moves the ready
  // buffers' positions into `slots` (cleared first).
  void take(std::vector<std::uint32_t>& slots, std::chrono::milliseconds timeout);
  [[nodiscard]] const std::string& buffer(std::uint32_t slot) const { return buffers_[slot]; }
  void give_back(const std::vector<std::uint32_t>& slots);
  // Taken buffers that could not be sent: ready again, first, in order.
  void requeue(std::span<const std::uint32_t> slots);
  // Wakes a take() at once (shutdown).
  void interrupt();

  [[nodiscard]] std::size_t waiting() const;

 private:
  mutable std::mutex mutex_;
  std::condition_variable wake_;
  std::vector<std::string> buffers_;
  std::vector<std::uint32_t> free_;   // capacity reserved: never reallocates
  std::vector<std::uint32_t> ready_;  // likewise
  bool interrupted_ = false;
};

}  // namespace kvgate::cluster
