#pragma once
// The engine's own price of computing one prompt token, from the growth of
// its prefill counters between scrapes (EngineLoad::prefill_seconds and
// computed_prompt_tokens). It sets the level of the cost model's prefill
// prices for that worker in place of the configured priors, which describe
// one model on one GPU: a CPU replica or a 70B model costs orders of
// magnitude more per token, and only the engine knows. Pure.
#include <cstdint>
#include <optional>

namespace kvgate::workers {

class EnginePrefillLevel {
 public:
  // Computed tokens the level follows (older work weighs less as newer
  // arrives), and the fewest it needs before it is used.
  static constexpr double kWindowTokens = 32'768;
  static constexpr double kMinTokens = 512;

  // The counters as scraped. The first scrape of an engine with enough
  // work behind it sets the level from its totals; after that, their
  // growth does. A counter that went down is an engine that restarted: the
  // next scrape's growth counts from the new values.
  void observe(double prefill_seconds, double computed_tokens);

  // Milliseconds per computed prompt token; nullopt until kMinTokens.
  [[nodiscard]] std::optional<double> ms_per_token() const;
  // Computed tokens behind the level (window-weighted).
  [[nodiscard]] double tokens() const { return tokens_; }

 private:
  std::optional<double> last_seconds_;
  std::optional<double> last_tokens_;
  double seconds_ = 0;
  double tokens_ = 0;
};

}  // namespace kvgate::workers
