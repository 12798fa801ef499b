#pragma once
// A per-minute budget as a token bucket: it holds at most one minute's
// allowance and refills continuously. Pure: the time is an argument.
#include <cstdint>

namespace kvgate::admission {

class TokenBucket {
 public:
  // `per_minute` > 0; the bucket starts full.
  explicit TokenBucket(double per_minute, std::uint64_t now_ms = 0)
      : per_minute_(per_minute), level_(per_minute), updated_ms_(now_ms) {}

  // Takes `amount` and returns 0 when the bucket holds at least one unit
  // (or the whole allowance, when that is less); the level may then go
  // below zero, so a request larger than a minute's allowance is admitted
  // once, alone, rather than never. Otherwise takes nothing and returns the
  // milliseconds until it holds that unit again (>= 1).
  std::uint64_t try_take(double amount, std::uint64_t now_ms);
  // The two halves of try_take, for a caller that must check several
  // buckets before taking from any: 0 when one unit is there.
  [[nodiscard]] std::uint64_t wait_ms(std::uint64_t now_ms) const;
  void take(double amount, std::uint64_t now_ms);

  // A reload changed the allowance: the level is kept, capped at the new one.
  void set_per_minute(double per_minute);

  [[nodiscard]] double level(std::uint64_t now_ms) const;
  [[nodiscard]] double per_minute() const { return per_minute_; }

 private:
  void refill(std::uint64_t now_ms);

  double per_minute_;
  double level_;
  std::uint64_t updated_ms_;
};

}  // namespace kvgate::admission
