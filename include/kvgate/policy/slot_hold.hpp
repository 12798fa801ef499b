#pragma once
// Whether, and how long, to keep a slot engine's freed slot for the
// conversation whose turn just ended there (admission.hold_slots).
// llama-server gives a freed slot to the oldest request waiting for one,
// which computes its own prompt over what the slot held: a conversation
// that comes back a moment later finds its history gone and computes all
// of it again. Kept idle for h, the slot saves that re-prefill, R, if the
// conversation's next turn comes within h, and is lost to every other
// request for as long as it stays idle. In slot time (what a saturated
// fleet is short of):
//   S(h) = q F(h) R - integral_0^h (1 - q F(s)) ds
// F: the distribution of think times (a turn's answer to the session's
// next turn), q: the share of turns followed by another (ReturnModel's
// gap_cdf and continuation, learned from the sessions' think times); the
// integral is the expected idle time (the slot idles until the turn comes
// or the hold ends). The hold is the h among the age buckets' edges up to
// twice R that maximises S, and none when no h gains. Pure.
#include "kvgate/policy/eviction.hpp"

namespace kvgate::policy {

struct SlotHold {
  double hold_ms = 0;           // 0: not worth keeping
  double expected_gain_ms = 0;  // S(hold_ms): slot time saved, in ms
};

// `think`: the model's think times (ReturnModel over them); `reprefill_ms`:
// what the conversation's history costs to compute again on that worker.
// Nothing is held before the model has learned, or for a free re-prefill.
[[nodiscard]] SlotHold choose_slot_hold(const ReturnModel& think, double reprefill_ms);

}  // namespace kvgate::policy
