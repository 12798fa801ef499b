#include "kvgate/workers/engine_prefill_level.hpp"

#include <cmath>

namespace kvgate::workers {

void EnginePrefillLevel::observe(double prefill_seconds, double computed_tokens) {
  if (!std::isfinite(prefill_seconds) || !std::isfinite(computed_tokens) || prefill_seconds < 0 ||
      computed_tokens < 0) {
    return;
  }
  if (!last_seconds_ && tokens_ == 0 && computed_tokens >= kMinTokens) {
    // The first scrape of an engine that has been working: its counters
    // since it started are a level already (a gateway that starts beside a
    // running fleet prices it at once).
    const double keep = computed_tokens > kWindowTokens ? kWindowTokens / computed_tokens : 1.0;
    seconds_ = prefill_seconds * keep;
    tokens_ = computed_tokens * keep;
  } else if (last_seconds_ && last_tokens_ && prefill_seconds >= *last_seconds_ && computed_tokens >= *last_tokens_) {
    const double seconds = prefill_seconds - *last_seconds_;
    const double tokens = computed_tokens - *last_tokens_;
    if (tokens > 0) {
      seconds_ += seconds;
      tokens_ += tokens;
      if (tokens_ > kWindowTokens) {
        const double keep = kWindowTokens / tokens_;
        seconds_ *= keep;
        tokens_ *= keep;
      }
    }
  }
  last_seconds_ = prefill_seconds;
  last_tokens_ = computed_tokens;
}

std::optional<double> EnginePrefillLevel::ms_per_token() const {
  if (tokens_ < kMinTokens || seconds_ <= 0) {
    return std::nullopt;
  }
  return seconds_ * 1000 / tokens_;
}

}  // namespace kvgate::workers
