#pragma once
// What waiting for a slot costs on an engine that runs at most `slots`
// requests at once (llama-server -np N). A request sent while every slot is
// busy starts only when `ahead` requests have released theirs (the requests
// in flight there beyond the slots, plus one), so its first token comes
// that much later than its queue and prefill price. Per worker, learned
// from its own outcomes:
// - a wait sample: a request sent with requests ahead, its first token
//   beyond the TTFT priced without the wait, per request ahead;
// - a hold sample: a request that found a slot free, its first token plus
//   its decode (how long it held the slot).
// The figure per request ahead is the median of the recent wait samples;
// before there are kMinWaits of them, the median hold over the slot count
// (the mean gap between releases of a full pool whose holds end
// independently of each other). Medians, so that one long answer does not
// move it. Pure; the worker's LearnedCosts holds one under a mutex and
// publishes the figure as an atomic the router reads.
#include <array>
#include <cstddef>
#include <cstdint>

namespace kvgate::policy {

class SlotWaitFit {
 public:
  static constexpr std::size_t kWindow = 16;
  static constexpr std::size_t kMinWaits = 3;

  // `excess_ms`: the realized first token less the TTFT priced without the
  // wait. Ignored when nothing was ahead or the figure is not finite; a
  // negative excess (the prefill priced high) counts as no wait.
  void observe_wait(std::uint32_t ahead, double excess_ms);
  // Ignored unless finite and positive.
  void observe_hold(double hold_ms);

  // The expected wait per request ahead on a worker with `slots` slots, in
  // ms; 0 when nothing is learned yet or `slots` is 0.
  [[nodiscard]] double ms_per_request_ahead(std::uint32_t slots) const;
  [[nodiscard]] std::size_t wait_samples() const { return waits_.count; }
  [[nodiscard]] std::size_t hold_samples() const { return holds_.count; }
  // Whether the figure comes from waits (true) or holds (false).
  [[nodiscard]] bool from_waits() const { return waits_.count >= kMinWaits; }

 private:
  struct Window {
    std::array<double, kWindow> values{};
    std::size_t count = 0;  // up to kWindow
    std::size_t next = 0;
    double median = 0;
    void add(double value);
  };
  Window waits_;
  Window holds_;
};

}  // namespace kvgate::policy
