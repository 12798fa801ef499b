#pragma once
// What an engine that keeps whole sequences in slots (llama-server) reuses
// of a conversation's next turn when the previous turn's slot is still
// idle. The slot holds the previous prompt and the answer it generated,
// token by token; the next prompt repeats both as its history, so the
// engine passes the index's figure (the previous prompt's whole blocks) by
// that prompt's last partial block and as much of the answer as the next
// prompt's tokens repeat exactly. How much that is depends on the model:
// an answer whose text tokenises back into the tokens generated is reused
// whole; a model that generates other splits of the same text (or a
// client that edits the answer) is reused to the first difference. So the
// share is learned per worker from the engine's own figures. Pure.
#include <cstddef>
#include <cstdint>

#include "kvgate/policy/recent_median.hpp"

namespace kvgate::policy {

struct SlotContinuation {
  std::uint32_t credited_tokens = 0;         // the index's figure for the worker (whole blocks)
  std::uint32_t previous_input_tokens = 0;   // the previous turn's prompt
  std::uint32_t previous_answer_tokens = 0;  // the tokens the engine generated for it
  bool answered = false;                     // its answer was read (else the two above are not known)
  double answer_reuse = 0;                   // of an answer, the share a next turn reuses (AnswerReuseFit)
  std::uint32_t input_tokens = 0;            // this prompt
  std::uint32_t block_size = 0;
};

// Whether the index's figure is the previous turn's slot: it covers exactly
// that prompt's whole blocks (a shorter match: the slot lost its head; a
// longer one: another slot holds more of this prompt).
[[nodiscard]] bool continues_previous_slot(const SlotContinuation& turn);
// The cached tokens to expect: the index's figure or, continuing the
// previous slot, the previous prompt and the reused share of its answer,
// short of this prompt's last token (which the engine always computes).
[[nodiscard]] std::uint32_t slot_continuation_tokens(const SlotContinuation& turn);

// The share of an answer a next turn reuses: the median of the recent
// turns that continued a slot, each the engine's cached tokens beyond the
// previous prompt over the answer's tokens (clamped to 0..1). Before
// kMinSamples of them, 0: what the slot surely holds is the prompt (an
// answer predicted and not reused would draw turns to a slot that does
// not give them).
class AnswerReuseFit {
 public:
  static constexpr std::size_t kWindow = RecentMedian::kWindow;
  static constexpr std::size_t kMinSamples = 3;
  // Ignored for an empty answer.
  void observe(std::uint32_t reused_answer_tokens, std::uint32_t answer_tokens);
  [[nodiscard]] double share() const { return shares_.count >= kMinSamples ? shares_.median : 0; }
  [[nodiscard]] std::size_t samples() const { return shares_.count; }

 private:
  RecentMedian shares_;
};

}  // namespace kvgate::policy
