#pragma once
// A value replaced whole (a reload) and read by many threads, each reader
// getting a shared_ptr to an immutable snapshot that stays valid while it
// holds it. Writers and occasional readers take a mutex; a thread that reads
// on every request keeps a Reader, which costs one atomic load while the
// value is unchanged and takes the mutex only after a replacement.
//
// Why not std::atomic<std::shared_ptr<T>>: libstdc++ 12's load releases its
// internal lock bit with a relaxed store, so the pointer read inside the
// lock may be ordered after the unlock (fixed in GCC 13), and
// ThreadSanitizer reports it.
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <utility>

namespace kvgate {

template <class T>
class Published {
 public:
  Published() = default;
  explicit Published(std::shared_ptr<T> value) : value_(std::move(value)) {}
  Published(const Published&) = delete;
  Published& operator=(const Published&) = delete;

  [[nodiscard]] std::shared_ptr<T> load() const {
    std::lock_guard lock(mutex_);
    return value_;
  }
  void store(std::shared_ptr<T> value) {
    {
      std::lock_guard lock(mutex_);
      value_.swap(value);
      version_.fetch_add(1, std::memory_order_release);
    }
    // `value` (the previous snapshot) is released here, outside the lock.
  }

  // One thread's cached view. Not thread-safe: one per reading thread.
  class Reader {
   public:
    explicit Reader(const Published& source) : source_(&source) {}
    // The current snapshot: the cached one while no store happened since.
    const std::shared_ptr<T>& current() {
      const auto version = source_->version_.load(std::memory_order_acquire);
      if (version != seen_) {
        std::lock_guard lock(source_->mutex_);
        cached_ = source_->value_;
        seen_ = source_->version_.load(std::memory_order_relaxed);
      }
      return cached_;
    }

   private:
    const Published* source_;
    std::shared_ptr<T> cached_;
    std::uint64_t seen_ = ~std::uint64_t{0};  // no version yet: the first call reads
  };

 private:
  mutable std::mutex mutex_;
  std::shared_ptr<T> value_;               // guarded by mutex_
  std::atomic<std::uint64_t> version_{0};  // incremented under mutex_ on every store
};

}  // namespace kvgate
