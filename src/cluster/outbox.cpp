#include "kvgate/cluster/outbox.hpp"

namespace kvgate::cluster {

Outbox::Outbox(std::size_t capacity) : buffers_(capacity) {
  free_.reserve(capacity);
  ready_.reserve(capacity);
  for (std::size_t slot = capacity; slot > 0; --slot) {
    free_.push_back(static_cast<std::uint32_t>(slot - 1));
  }
}

void Outbox::take(std::vector<std::uint32_t>& slots, std::chrono::milliseconds timeout) {
  slots.clear();
  std::unique_lock lock(mutex_);
  wake_.wait_for(lock, timeout, [&] { return !ready_.empty() || interrupted_; });
  interrupted_ = false;
  slots.swap(ready_);
  // ready_ now holds `slots`' old storage; keep it able to take every buffer.
  ready_.clear();
  ready_.reserve(buffers_.size());
}

void Outbox::give_back(const std::vector<std::uint32_t>& slots) {
  std::lock_guard lock(mutex_);
  free_.insert(free_.end(), slots.begin(), slots.end());
}

void Outbox::requeue(std::span<const std::uint32_t> slots) {
  std::lock_guard lock(mutex_);
  // Never reallocates: ready_ can hold every buffer, and these were taken.
  ready_.insert(ready_.begin(), slots.begin(), slots.end());
}

void Outbox::interrupt() {
  {
    std::lock_guard lock(mutex_);
    interrupted_ = true;
  }
  wake_.notify_one();
}

std::size_t Outbox::waiting() const {
  std::lock_guard lock(mutex_);
  return ready_.size();
}

}  // namespace kvgate::cluster
