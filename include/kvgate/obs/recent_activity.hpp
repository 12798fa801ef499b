#pragma once
// What the status page shows of the last minutes: the last routed requests
// (worker, reason, predicted and engine-reported cached tokens) and the
// prompt tokens the engines reported cached, in fixed time buckets.
//
// Bounded: a ring of kDecisionsKept records with fixed-size text fields
// (longer text is cut), and kBuckets buckets of bucket_ms each; recording
// never allocates. Time is an input (milliseconds since the Unix epoch).
//
// Threading: one mutex, held for a copy into the ring and two additions;
// every I/O thread records once per finished request, the admin thread
// reads. The lock is uncontended at the request rates one gateway serves
// (a few thousand per second against a hold of well under a microsecond).
#include <algorithm>
#include <array>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kvgate::obs {

// A text field of the ring: at most N-1 bytes, cut at a UTF-8 boundary.
template <std::size_t N>
class ShortText {
 public:
  void assign(std::string_view text) {
    std::size_t size = text.size() < N ? text.size() : N - 1;
    // Never end inside a multi-byte character: the page shows these.
    if (size < text.size()) {
      while (size > 0 && (static_cast<unsigned char>(text[size]) & 0xC0U) == 0x80U) {
        --size;
      }
    }
    std::copy_n(text.data(), size, bytes_.data());
    size_ = size;
  }
  [[nodiscard]] std::string_view view() const { return {bytes_.data(), size_}; }

 private:
  std::array<char, N> bytes_{};
  std::size_t size_ = 0;
};

struct RoutedRequest {
  std::uint64_t unix_ms = 0;  // when it finished
  ShortText<40> request_id;
  ShortText<64> model;
  ShortText<64> worker;
  ShortText<64> prefill_worker;  // a disaggregated request's, when one computed the prompt
  ShortText<32> reason;          // the route's reason (policy::to_string)
  ShortText<48> session;         // the session key as sent, cut
  std::uint32_t input_tokens = 0;
  std::uint32_t predicted_cached_tokens = 0;
  std::optional<std::uint32_t> prompt_tokens;  // the engine's usage, when it sent it
  std::optional<std::uint32_t> cached_tokens;
  std::optional<double> ttft_ms;
  int status = 0;
};

struct HitBucket {
  std::uint64_t start_unix_ms = 0;
  std::uint64_t requests = 0;       // requests whose engine reported usage
  std::uint64_t prompt_tokens = 0;  // the engine's figures
  std::uint64_t cached_tokens = 0;
};

class RecentActivity {
 public:
  static constexpr std::size_t kDecisionsKept = 64;
  static constexpr std::size_t kBuckets = 30;

  explicit RecentActivity(std::uint64_t bucket_ms = 20'000) : bucket_ms_(bucket_ms == 0 ? 1 : bucket_ms) {}

  void record(const RoutedRequest& request);

  // Newest first, at most `limit`.
  [[nodiscard]] std::vector<RoutedRequest> recent(std::size_t limit) const;
  // The kBuckets buckets ending with the one holding now_ms, oldest first;
  // a bucket nothing was recorded in is zero.
  [[nodiscard]] std::vector<HitBucket> hit_buckets(std::uint64_t now_unix_ms) const;
  [[nodiscard]] std::uint64_t bucket_ms() const { return bucket_ms_; }

 private:
  const std::uint64_t bucket_ms_;
  mutable std::mutex mutex_;
  std::array<RoutedRequest, kDecisionsKept> ring_{};
  std::size_t recorded_ = 0;  // total ever; the next slot is recorded_ % kDecisionsKept
  std::array<HitBucket, kBuckets> buckets_{};
};

}  // namespace kvgate::obs
