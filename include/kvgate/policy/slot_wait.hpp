#pragma once
// What waiting for a slot costs on an engine that runs at most `slots`
// requests at once (llama-server -np N). A request sent while every slot is
// busy starts only when `ahead` requests have released theirs (the requests
// in flight there beyond the slots, plus one), so its first token comes
// that much later than its queue and prefill price. Per worker, learned
// from its own outcomes:
// - a wait sample: a request sent with requests ahead, its measured wait
//   for a slot (or, unmeasured, its first token beyond the TTFT priced
//   without the wait), per request ahead;
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
#include <optional>
#include <span>

#include "kvgate/policy/recent_median.hpp"

namespace kvgate::policy {

class SlotWaitFit {
 public:
  static constexpr std::size_t kWindow = RecentMedian::kWindow;
  static constexpr std::size_t kMinWaits = 3;

  // `excess_ms`: the realized wait (measured, or the realized first token
  // less the TTFT priced without the wait). Ignored when nothing was ahead
  // or the figure is not finite; a negative excess (the prefill priced
  // high) counts as no wait.
  // `forecast_ms`: the release forecast's wait before the correction (0:
  // the wait was not forecast); with it the excess also teaches the
  // correction, the median of recent excess / forecast.
  void observe_wait(std::uint32_t ahead, double excess_ms, double forecast_ms = 0);
  // Ignored unless finite and positive.
  void observe_hold(double hold_ms);

  // The expected wait per request ahead on a worker with `slots` slots, in
  // ms; 0 when nothing is learned yet or `slots` is 0.
  [[nodiscard]] double ms_per_request_ahead(std::uint32_t slots) const;
  // What forecast waits are multiplied by: the median realized/forecast of
  // the recent forecast waits; 1 before kMinWaits of them. It carries what
  // the forecast leaves out (holds of other prompt lengths in the window,
  // an engine's order other than arrival, the prefill's own error).
  [[nodiscard]] double forecast_scale() const { return ratios_.count >= kMinWaits ? ratios_.median : 1.0; }
  [[nodiscard]] std::size_t forecast_samples() const { return ratios_.count; }
  // A request's realized first token from its slot's start (its dispatch
  // when a slot was free) over its price at the configured priors (queue
  // terms and prefill, with the cached tokens the engine reported).
  // Ignored unless finite and non-negative.
  void observe_free(double realized_over_priors);
  // The level of a slot worker's prices over the priors, as its answers
  // from their slots' starts show it: the median of the recent ratios; nullopt before
  // kMinWaits of them. It replaces the level read from the engine's prefill
  // clock, which on llama-server sums the times of slots that compute at
  // once and is read under whatever else shares the host, while a
  // free-slot first token is the whole price as a request sees it.
  [[nodiscard]] std::optional<double> free_level() const {
    return free_.count >= kMinWaits ? std::optional(free_.median) : std::nullopt;
  }
  [[nodiscard]] std::size_t free_samples() const { return free_.count; }
  [[nodiscard]] std::size_t wait_samples() const { return waits_.count; }
  [[nodiscard]] std::size_t hold_samples() const { return holds_.count; }
  // Whether the figure comes from waits (true) or holds (false).
  [[nodiscard]] bool from_waits() const { return waits_.count >= kMinWaits; }
  // The recent holds, in no order (up to kWindow), into `out`; how many.
  std::size_t holds(std::span<double, kWindow> out) const;

 private:
  RecentMedian waits_;
  RecentMedian holds_;
  RecentMedian ratios_;
  RecentMedian free_;
};

// A slot worker's free-slot level as it is priced. Its own level stands
// while it is fresh; once the fleet's other workers have taught a whole
// window of free-slot answers (SlotWaitFit::kWindow) since this worker's
// last, its level describes another time (another load on shared hosts,
// a warm-up's contention) and a worker priced high on it would never be
// chosen to correct it. Then it is priced at most at the fleet's median
// level: an idle worker gets a request, whose answer makes its level its
// own again (a worker that is slower indeed keeps its price after that
// one answer). `own_mark` and `fleet_answers` count the model's free-slot
// answers (the mark: the count at the worker's last one).
struct FreeLevelFreshness {
  std::uint64_t own_mark = 0;
  std::uint64_t fleet_answers = 0;
  double fleet_median = 0;  // of the workers' levels; 0: none known
};
[[nodiscard]] bool free_level_stale(const FreeLevelFreshness& freshness);
[[nodiscard]] double priced_free_level(double own_level, const FreeLevelFreshness& freshness);

// When each busy slot of a slot engine is expected to free, as one decision
// sees it: a request that has held its slot for a while is that much nearer
// its end than one that just started, which a figure per request ahead
// cannot tell. Built by the shell from the requests it has in flight there
// (workers/slot_occupancy.hpp) and the worker's recent holds.
struct SlotReleases {
  static constexpr std::size_t kMaxSlots = 16;
  std::array<double, kMaxSlots> in_ms{};  // ms from the decision, one per slot
  std::uint32_t count = 0;                // 0: no forecast (nothing held yet, or more slots than kMaxSlots)
  double mean_hold_ms = 0;                // what a request that takes a freed slot holds it
  double scale = 1;                       // the worker's learned correction (SlotWaitFit::forecast_scale)
};

// The expected rest of a hold already `held_ms` long: the mean of h - held_ms
// over the recent holds longer than it (0 when it outlasts them all: an
// answer longer than every recent one is taken to be ending).
double remaining_hold_ms(std::span<const double> holds, double held_ms);

// The expected rest of a hold seen at a moment unrelated to its start (a
// slot taken by a request this gateway did not send): E[h^2] / 2E[h], the
// renewal-theory residual, which weighs long holds as often as they are
// caught in progress.
double unseen_remaining_hold_ms(std::span<const double> holds);

// The slots' releases: each tracked running request's remaining hold, the
// rest of `slots` (occupants the gateway did not send) the unseen
// residual. No forecast (count 0) without holds or beyond kMaxSlots slots.
SlotReleases forecast_releases(std::span<const double> holds, std::span<const double> held_ms, std::uint32_t slots);

// The wait for a slot with `ahead` requests ahead of a free one
// (requests_ahead_of_slot): the ahead-th release, each request before this
// one taking the earliest freed slot and holding it the mean hold (FIFO, as
// llama-server defers tasks); before the correction `scale`. 0 when ahead is
// 0 or there is no forecast.
double wait_for_slot_ms(const SlotReleases& releases, std::uint32_t ahead);

}  // namespace kvgate::policy
