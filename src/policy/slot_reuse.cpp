#include "kvgate/policy/slot_reuse.hpp"

#include <algorithm>
#include <cmath>

namespace kvgate::policy {

bool continues_previous_slot(const SlotContinuation& turn) {
  if (turn.block_size == 0 || !turn.answered || turn.credited_tokens == 0 || turn.input_tokens == 0) {
    return false;
  }
  return turn.credited_tokens == turn.previous_input_tokens / turn.block_size * turn.block_size;
}

std::uint32_t slot_continuation_tokens(const SlotContinuation& turn) {
  if (!continues_previous_slot(turn)) {
    return turn.credited_tokens;
  }
  const double share = std::clamp(turn.answer_reuse, 0.0, 1.0);
  const auto reused_answer =
      static_cast<std::uint32_t>(std::lround(share * static_cast<double>(turn.previous_answer_tokens)));
  const auto held = turn.previous_input_tokens + reused_answer;
  return std::max(turn.credited_tokens, std::min(held, turn.input_tokens - 1));
}

void AnswerReuseFit::observe(std::uint32_t reused_answer_tokens, std::uint32_t answer_tokens) {
  if (answer_tokens != 0) {
    shares_.add(std::min(1.0, static_cast<double>(reused_answer_tokens) / static_cast<double>(answer_tokens)));
  }
}

}  // namespace kvgate::policy
