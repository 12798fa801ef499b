#include "kvgate/kv_events/sequence_slots.hpp"

#include <gtest/gtest.h>

#include <initializer_list>
#include <numeric>

#include "kvgate/kv_events/worker_caches.hpp"

namespace kvgate::kv_events {
namespace {

constexpr std::uint32_t kBlockSize = 4;

// A prompt of `blocks` blocks whose first `shared` blocks are the shared
// system prompt `family`, the rest this conversation's.
std::vector<BlockHash> prompt_blocks(std::uint32_t family, std::size_t shared, std::uint32_t conversation,
                                     std::size_t blocks) {
  std::vector<std::uint32_t> tokens;
  for (std::size_t index = 0; index < blocks * kBlockSize; ++index) {
    const bool in_shared = index < shared * kBlockSize;
    tokens.push_back((in_shared ? family * 100'000 : 50'000'000 + conversation * 100'000) +
                     static_cast<std::uint32_t>(index));
  }
  return prefix::hash_blocks(tokens, kBlockSize, prefix::partition_seed({"model", "", ""}));
}

std::vector<BlockHash> extend(std::vector<BlockHash> blocks, std::uint32_t turn) {
  for (std::uint32_t index = 0; index < 3; ++index) {
    blocks.push_back(blocks.back() * 31 + turn * 7 + index + 1);
  }
  return blocks;
}

// Runs `prompts` to their ends, tickets 1, 2, ...: one after the other
// (so each may take the slot the one before used), or all at once (one
// slot each). The slots are then idle, holding them.
void run_in_turn(SequenceSlots& slots, std::initializer_list<const std::vector<BlockHash>*> prompts,
                 SequenceSlots::Changes& changes) {
  std::uint64_t ticket = 0;
  for (const auto* prompt : prompts) {
    ++ticket;
    slots.start(*prompt, ticket, ticket * 20, changes);
    slots.finish(ticket, ticket * 20 + 10, changes);
  }
}
void run_together(SequenceSlots& slots, std::initializer_list<const std::vector<BlockHash>*> prompts,
                  SequenceSlots::Changes& changes) {
  std::uint64_t ticket = 0;
  for (const auto* prompt : prompts) {
    ++ticket;
    slots.start(*prompt, ticket, ticket * 10, changes);
  }
  for (std::uint64_t ended = 1; ended <= ticket; ++ended) {
    slots.finish(ended, 100 + ended, changes);
  }
}

// Worker 0 of an index of its own, modelled as `slots` slots (and a RAM
// cache of `ram_blocks`).
struct SequencesWorker {
  explicit SequencesWorker(std::uint32_t slots, std::uint64_t ram_blocks = 0) {
    caches.set_sequence_slots(0, slots, 0.1, 600'000, ram_blocks);
  }
  index::PrefixIndex index{1'000'000};
  AttentionLayout attention;
  WorkerCaches caches{index, "model", CacheLimits{kBlockSize}, attention};
};

TEST(SequenceSlots, ARunningSlotIsNotCreditedAndItsPromptIsOnceItEnds) {
  SequenceSlots slots(2, 0.1);
  SequenceSlots::Changes changes;
  auto a = prompt_blocks(1, 4, 1, 8);
  slots.start(a, 1, 0, changes);
  EXPECT_TRUE(changes.credit.empty());
  EXPECT_FALSE(slots.credits(a[0]));
  EXPECT_EQ(slots.busy_slots(), 1u);
  slots.finish(1, 10, changes);
  EXPECT_EQ(changes.credit.size(), a.size());
  EXPECT_TRUE(slots.credits(a.back()));
  EXPECT_EQ(slots.credited_blocks(), a.size());
}

TEST(SequenceSlots, TheNextTurnReturnsToItsSlotAndAnotherConversationOverwritesTheLeastRecentlyUsed) {
  SequenceSlots slots(2, 0.1);
  SequenceSlots::Changes changes;
  auto a = prompt_blocks(1, 2, 1, 8);
  auto b = prompt_blocks(2, 2, 2, 8);
  slots.start(a, 1, 0, changes);  // slot 1 (the last of equally unused)
  slots.finish(1, 10, changes);
  slots.start(b, 2, 20, changes);  // nothing in common with a: the unused slot 0
  slots.finish(2, 30, changes);
  EXPECT_EQ(slots.slot_blocks(1).size(), a.size());
  EXPECT_EQ(slots.slot_blocks(0).size(), b.size());
  // a's next turn extends a: slot 1 by similarity, b stays.
  auto a2 = extend(a, 2);
  changes.clear();
  slots.start(a2, 3, 40, changes);
  EXPECT_EQ(slots.slot_ticket(1), std::optional<std::uint64_t>(3u));
  EXPECT_FALSE(slots.credits(a[0]));  // a's slot runs: its blocks serve nobody else now
  EXPECT_TRUE(slots.credits(b[0]));
  slots.finish(3, 50, changes);
  // A third conversation sharing nothing takes the least recently used slot
  // (b's, used at 30), so b's blocks are no longer credited.
  auto c = prompt_blocks(3, 2, 3, 8);
  slots.start(c, 4, 60, changes);
  slots.finish(4, 70, changes);
  EXPECT_FALSE(slots.credits(b[0]));
  EXPECT_TRUE(slots.credits(a2.back()));
  EXPECT_TRUE(slots.credits(c.back()));
}

TEST(SequenceSlots, ASharedSystemPromptAboveTheThresholdTakesThatSlotAndLosesItsTail) {
  SequenceSlots slots(2, 0.1);
  SequenceSlots::Changes changes;
  auto a = prompt_blocks(1, 6, 1, 8);  // 6 of 8 blocks are the system prompt
  slots.start(a, 1, 0, changes);
  slots.finish(1, 10, changes);
  auto b = prompt_blocks(1, 6, 2, 8);  // same system prompt, another user
  slots.start(b, 2, 20, changes);
  slots.finish(2, 30, changes);
  auto held = slots.slot_blocks(1);
  EXPECT_TRUE(std::equal(held.begin(), held.end(), b.begin(), b.end()));  // a's slot, by similarity 0.75
  EXPECT_TRUE(slots.credits(a[5]));                                       // the shared part stays
  EXPECT_FALSE(slots.credits(a[6]));                                      // a's own turn is gone
}

TEST(SequenceSlots, RequestsBeyondTheSlotsWaitAndTakeTheFirstSlotReleased) {
  SequenceSlots slots(1, 0.1);
  SequenceSlots::Changes changes;
  auto a = prompt_blocks(1, 2, 1, 4);
  auto b = prompt_blocks(2, 2, 2, 4);
  slots.start(a, 1, 0, changes);
  slots.start(b, 2, 5, changes);
  EXPECT_EQ(slots.waiting(), 1u);
  slots.finish(1, 10, changes);
  EXPECT_EQ(slots.waiting(), 0u);
  EXPECT_EQ(slots.slot_ticket(0), std::optional<std::uint64_t>(2u));
  EXPECT_FALSE(slots.credits(a[0]));  // b took the slot at once
  EXPECT_TRUE(std::find(changes.credit.begin(), changes.credit.end(), a[0]) != changes.credit.end());
}

TEST(SequenceSlots, WithEverySlotBusyTheOneExpectedFreeNextIsCredited) {
  SequenceSlots slots(2, 0.1);
  SequenceSlots::Changes changes;
  auto a = prompt_blocks(1, 2, 1, 4);
  auto b = prompt_blocks(2, 2, 2, 4);
  auto c = prompt_blocks(3, 2, 3, 4);
  slots.start(a, 1, 0, changes);
  EXPECT_FALSE(slots.credits(a[0]));  // the other slot is idle: a new request goes there
  slots.start(b, 2, 5, changes);
  EXPECT_TRUE(slots.credits(a[0]));  // a started first: its slot frees first
  EXPECT_FALSE(slots.credits(b[0]));
  slots.start(c, 3, 6, changes);  // waits; the request after it would get b's slot
  EXPECT_FALSE(slots.credits(a[0]));
  EXPECT_TRUE(slots.credits(b[0]));
  slots.finish(1, 10, changes);  // c takes a's slot
  EXPECT_EQ(slots.slot_ticket(1), std::optional<std::uint64_t>(3u));
  EXPECT_FALSE(slots.credits(a[0]));
  EXPECT_TRUE(slots.credits(b[0]));  // b's slot is the next one free
  slots.finish(2, 12, changes);
  EXPECT_TRUE(slots.credits(b[0]));  // idle now
  EXPECT_FALSE(slots.credits(c[0]));
}

// With as many requests waiting as running, each release goes to a waiting
// request: a new one takes a slot only after a waiting one has run in it,
// so it finds that request's prompt there, not the one running now.
TEST(SequenceSlots, WithAsManyWaitingAsRunningTheWaitingRequestsPromptIsCredited) {
  SequenceSlots slots(2, 0.1);
  SequenceSlots::Changes changes;
  auto a = prompt_blocks(1, 2, 1, 4);
  auto b = prompt_blocks(2, 2, 2, 4);
  auto c = prompt_blocks(3, 2, 3, 4);
  auto d = prompt_blocks(4, 2, 4, 4);
  slots.start(a, 1, 0, changes);
  slots.start(b, 2, 5, changes);
  slots.start(c, 3, 6, changes);  // takes a's slot when a ends
  slots.start(d, 4, 7, changes);  // takes b's slot when b ends
  EXPECT_EQ(slots.waiting(), 2u);
  EXPECT_TRUE(slots.credits(c[0]));  // a request after d runs where c will have run
  EXPECT_FALSE(slots.credits(a[0]));
  EXPECT_FALSE(slots.credits(b[0]));
  EXPECT_FALSE(slots.credits(d[0]));
  slots.finish(1, 10, changes);      // c runs in a's slot; d still waits, for b's
  EXPECT_TRUE(slots.credits(c[0]));  // so a new request takes c's slot after c
  EXPECT_FALSE(slots.credits(b[0]));
}

// The engine's figure for a request names the sequence it really ran
// on: another slot's, not the one the model gave it. The sequence the
// model had it take is still in the engine, where that other one was.
TEST(SequenceSlots, TheEnginesFigureMovesASequenceTheRequestDidNotTake) {
  SequenceSlots slots(3, 0.1);
  SequenceSlots::Changes changes;
  auto a = prompt_blocks(3, 3, 1, 8);  // shares 3 blocks with the request below
  auto b = prompt_blocks(2, 0, 2, 8);  // shares none
  auto c = prompt_blocks(3, 6, 3, 8);  // shares 6
  run_together(slots, {&a, &b, &c}, changes);
  auto request = prompt_blocks(3, 6, 9, 10);
  slots.start(request, 4, 200, changes);  // the model: c's slot, the most similar
  EXPECT_FALSE(slots.credits(c.back()));
  slots.finish(4, 210, changes, 3);  // the engine reused 3 blocks: it ran on a
  EXPECT_TRUE(slots.credits(c.back()));
  EXPECT_FALSE(slots.credits(a.back()));
  EXPECT_TRUE(slots.credits(b.back()));
  EXPECT_TRUE(slots.credits(request.back()));
}

// A figure beyond what any modelled sequence gives: the engine held one the
// model had lost. With one other slot idle, that is where the model was
// wrong: it holds the sequence the request did not take.
TEST(SequenceSlots, AFigureNoSequenceGivesCorrectsTheOnlyOtherIdleSlot) {
  SequenceSlots slots(2, 0.1);
  SequenceSlots::Changes changes;
  auto a = prompt_blocks(1, 0, 1, 6);
  auto x = prompt_blocks(2, 0, 2, 6);  // what the model wrongly believes the other slot holds
  run_in_turn(slots, {&a, &x}, changes);
  auto b2 = extend(prompt_blocks(4, 0, 4, 6), 2);  // a turn of a conversation the model had lost
  slots.start(b2, 3, 100, changes);                // the model: a's slot (used longest ago)
  slots.finish(3, 110, changes, 6);                // the engine: 6 blocks, b's whole sequence
  EXPECT_TRUE(slots.credits(a.back()));
  EXPECT_FALSE(slots.credits(x.back()));
  EXPECT_TRUE(slots.credits(b2.back()));
}

// A figure that fits the modelled slot, or that two other slots could
// give, or whose other slot has changed since, moves nothing.
TEST(SequenceSlots, AFigureThatFitsOrCannotBePlacedMovesNothing) {
  SequenceSlots slots(3, 0.1);
  SequenceSlots::Changes changes;
  auto a = prompt_blocks(1, 0, 1, 6);
  auto b = prompt_blocks(2, 0, 2, 6);
  auto c = prompt_blocks(3, 0, 3, 6);
  run_together(slots, {&a, &b, &c}, changes);
  auto fresh = prompt_blocks(4, 0, 4, 6);
  slots.start(fresh, 4, 200, changes);  // shares nothing: takes a's slot (used longest ago)
  slots.finish(4, 210, changes, 0);     // 0 fits a's slot too: nothing moves
  EXPECT_FALSE(slots.credits(a.back()));
  EXPECT_TRUE(slots.credits(b.back()));
  EXPECT_TRUE(slots.credits(c.back()));
  auto b2 = extend(b, 2);
  slots.start(b2, 5, 220, changes);  // takes b's slot
  slots.finish(5, 230, changes, 1);  // a figure two other slots could give: nothing moves
  EXPECT_TRUE(slots.credits(b2.back()));
  EXPECT_TRUE(slots.credits(c.back()));
}

// The RAM cache turned off (the worker's answers showed none): its
// sequences go, what the slots hold and run stays.
TEST(SequenceSlots, ReconfiguredWithoutTheRamCacheKeepsItsSlots) {
  SequenceSlots slots(1, 0.1, /*ram_blocks=*/100);
  SequenceSlots::Changes changes;
  auto a = prompt_blocks(1, 0, 1, 6);
  auto b = prompt_blocks(2, 0, 2, 6);
  run_in_turn(slots, {&a}, changes);
  slots.start(b, 2, 100, changes);  // a is saved to RAM
  EXPECT_TRUE(slots.ram_credits(a.back()));
  changes.clear();
  slots.reconfigure(0.1, 0, changes);
  EXPECT_FALSE(slots.ram_credits(a.back()));
  EXPECT_EQ(changes.ram_uncredit.size(), a.size());
  EXPECT_EQ(slots.busy_slots(), 1u);
  slots.finish(2, 30, changes);
  EXPECT_TRUE(slots.credits(b.back()));
}

TEST(SequenceSlots, AWithdrawnRequestLeavesItsSlotAsItWas) {
  SequenceSlots slots(1, 0.1);
  SequenceSlots::Changes changes;
  auto a = prompt_blocks(1, 2, 1, 4);
  slots.start(a, 1, 0, changes);
  slots.finish(1, 10, changes);
  auto refused = prompt_blocks(2, 2, 2, 40);
  slots.start(refused, 2, 20, changes);
  EXPECT_FALSE(slots.credits(a[0]));
  slots.withdraw(2, 30, changes);
  EXPECT_TRUE(slots.credits(a[0]));
  EXPECT_FALSE(slots.credits(refused[0]));
}

TEST(SequenceSlots, TheHostRamCacheIsCreditedAsTheLowerTierAndRestoredFrom) {
  SequenceSlots slots(1, 0.1, /*ram_blocks=*/10);
  SequenceSlots::Changes changes;
  auto a = prompt_blocks(1, 2, 1, 6);
  auto b = prompt_blocks(2, 2, 2, 6);
  slots.start(a, 1, 0, changes);
  slots.finish(1, 10, changes);
  slots.start(b, 2, 20, changes);  // LRU: a's sequence is saved to RAM
  EXPECT_TRUE(slots.ram_credits(a[0]));
  EXPECT_FALSE(slots.credits(a[0]));
  slots.finish(2, 30, changes);
  auto a2 = extend(a, 2);
  slots.start(a2, 3, 40, changes);  // b saved, a restored: a leaves the RAM cache
  EXPECT_FALSE(slots.ram_credits(a[0]));
  EXPECT_TRUE(slots.ram_credits(b[0]));
  EXPECT_EQ(slots.ram_sequences(), 1u);
  slots.finish(3, 50, changes);
  auto c = prompt_blocks(3, 2, 3, 6);
  slots.start(c, 4, 60, changes);  // a2 (9 blocks) saved: over 10 blocks with b, b goes
  EXPECT_FALSE(slots.ram_credits(b[0]));
  EXPECT_TRUE(slots.ram_credits(a2.back()));
  EXPECT_EQ(slots.ram_blocks(), a2.size());
}

TEST(WorkerCachesSequences, TheRamCacheIsTheOffloadedTierOfTheIndex) {
  SequencesWorker worker(1, /*ram_blocks=*/100);
  auto& index = worker.index;
  auto& caches = worker.caches;
  auto a = prompt_blocks(1, 2, 1, 6);
  auto b = prompt_blocks(2, 2, 2, 6);
  caches.assume(0, a, 0, 1000, 1000, 1);
  caches.finish(0, 1, 10);
  caches.assume(0, b, 20, 1000, 1000, 2);
  caches.finish(0, 2, 30);
  auto match = index.longest_prefix(a);
  EXPECT_EQ(match.blocks[0], a.size());  // held, on the lower tier only
  EXPECT_EQ(match.held_on_gpu(0), 0u);
  EXPECT_EQ(index.longest_prefix(b).held_on_gpu(0), b.size());
}

// The worker's answers showed no RAM cache: the lower tier goes from the
// index, the slots' requests and contents stay (a running request still
// frees its slot).
TEST(WorkerCachesSequences, TurningTheRamCacheOffKeepsTheSlotsState) {
  SequencesWorker worker(1, /*ram_blocks=*/100);
  auto& index = worker.index;
  auto& caches = worker.caches;
  auto a = prompt_blocks(1, 2, 1, 6);
  auto b = prompt_blocks(2, 2, 2, 6);
  caches.assume(0, a, 0, 1000, 1000, 1);
  caches.finish(0, 1, 10);
  caches.assume(0, b, 20, 1000, 1000, 2);  // running; a saved to RAM
  EXPECT_EQ(index.longest_prefix(a).blocks[0], a.size());
  caches.set_sequence_slots(0, 1, 0.1, 600'000, 0);
  EXPECT_EQ(index.longest_prefix(a).blocks[0], 0u);
  ASSERT_NE(caches.sequence_slots(0), nullptr);
  EXPECT_EQ(caches.sequence_slots(0)->busy_slots(), 1u);
  caches.finish(0, 2, 30);
  EXPECT_EQ(index.longest_prefix(b).held_on_gpu(0), b.size());
}

// A restarted engine runs what was sent to it after the restart; what the
// slots and the RAM cache held before is gone.
TEST(SequenceSlots, ARestartedEngineKeepsOnlyTheRequestsItRuns) {
  SequenceSlots slots(2, 0.1, /*ram_blocks=*/100);
  SequenceSlots::Changes changes;
  auto a = prompt_blocks(1, 2, 1, 6);
  auto b = prompt_blocks(2, 2, 2, 6);
  auto c = prompt_blocks(3, 2, 3, 6);
  auto d = prompt_blocks(4, 2, 4, 6);
  run_together(slots, {&a, &b}, changes);
  slots.start(c, 3, 200, changes);  // takes a's slot, a saved to RAM
  ASSERT_TRUE(slots.ram_credits(a.back()));
  slots.start(d, 4, 210, changes);  // b's slot
  auto e = prompt_blocks(5, 2, 5, 6);
  slots.start(e, 5, 220, changes);  // waits
  changes.clear();
  slots.engine_restarted(changes);
  EXPECT_FALSE(slots.ram_credits(a.back()));
  EXPECT_EQ(slots.ram_sequences(), 0u);
  EXPECT_EQ(slots.busy_slots(), 2u);
  EXPECT_EQ(slots.waiting(), 1u);
  // A new request would take the release after the waiting one's: the
  // slot running d, which still holds it.
  EXPECT_TRUE(slots.credits(d.back()));
  EXPECT_FALSE(slots.credits(c.back()));
  slots.finish(3, 300, changes);  // e takes c's slot, d runs on
  slots.finish(4, 310, changes);
  EXPECT_TRUE(slots.credits(d.back()));
  EXPECT_FALSE(slots.credits(b.back()));
  slots.finish(5, 320, changes);
  EXPECT_TRUE(slots.credits(e.back()));
  EXPECT_EQ(slots.busy_slots(), 0u);
}

TEST(WorkerCachesSequences, ARestartedEngineLeavesTheIndexOnlyWhatItsRequestsLeave) {
  SequencesWorker worker(2);
  auto& index = worker.index;
  auto& caches = worker.caches;
  auto a = prompt_blocks(1, 2, 1, 6);
  auto b = prompt_blocks(2, 2, 2, 6);
  caches.assume(0, a, 0, 1000, 1000, 1);
  caches.finish(0, 1, 10);
  caches.assume(0, b, 20, 1000, 1000, 2);  // running on the restarted engine
  EXPECT_EQ(index.longest_prefix(a).blocks[0], a.size());
  caches.engine_restarted(0, 30);
  EXPECT_EQ(index.longest_prefix(a).blocks[0], 0u);
  caches.finish(0, 2, 40);  // still followed: its prompt is in a slot now
  EXPECT_EQ(index.longest_prefix(b).held_on_gpu(0), b.size());
}

TEST(SequenceSlots, TheFirstDecisionsTicketZeroIsFollowedLikeAnyOther) {
  SequenceSlots slots(1, 0.1);
  SequenceSlots::Changes changes;
  auto a = prompt_blocks(1, 2, 1, 4);
  slots.start(a, 0, 0, changes);
  EXPECT_EQ(slots.slot_ticket(0), std::optional<std::uint64_t>(0));
  slots.finish(0, 10, changes);
  EXPECT_FALSE(slots.slot_ticket(0));
  EXPECT_TRUE(slots.credits(a[0]));
}

TEST(SequenceSlots, ALostEndExpires) {
  SequenceSlots slots(1, 0.1);
  SequenceSlots::Changes changes;
  auto a = prompt_blocks(1, 2, 1, 4);
  slots.start(a, 1, 0, changes);
  slots.expire(500, 1000, changes);
  EXPECT_EQ(slots.busy_slots(), 1u);
  slots.expire(1000, 1000, changes);
  EXPECT_EQ(slots.busy_slots(), 0u);
  EXPECT_TRUE(slots.credits(a[0]));
}

TEST(WorkerCachesSequences, TheIndexCreditsExactlyWhatIdleSlotsHold) {
  SequencesWorker worker(2);
  auto& index = worker.index;
  auto& caches = worker.caches;
  auto a = prompt_blocks(1, 6, 1, 8);
  auto b = prompt_blocks(1, 6, 2, 8);
  caches.assume(0, a, 0, 1000, 1000, 1);
  EXPECT_EQ(index.longest_prefix(a).blocks[0], 0u);  // running
  caches.finish(0, 1, 10);
  EXPECT_EQ(index.longest_prefix(a).blocks[0], 8u);
  EXPECT_EQ(caches.gpu_blocks(0), 8u);
  caches.assume(0, b, 20, 1000, 1000, 2);  // takes a's slot (similarity 0.75)
  caches.finish(0, 2, 30);
  EXPECT_EQ(index.longest_prefix(a).blocks[0], 6u);  // the shared system prompt only
  EXPECT_EQ(index.longest_prefix(b).blocks[0], 8u);
  // A refused request gives its slot back as it was.
  auto refused = prompt_blocks(3, 2, 3, 8);
  caches.assume(0, refused, 40, 1000, 1000, 3);
  caches.withdraw(0, refused, 3, 50);
  EXPECT_EQ(index.longest_prefix(refused).blocks[0], 0u);
  EXPECT_EQ(index.longest_prefix(b).blocks[0], 8u);
  // Back to the blocks model: the worker starts afresh.
  caches.set_sequence_slots(0, 0, 0.1, 600'000);
  EXPECT_EQ(index.longest_prefix(b).blocks[0], 0u);
  EXPECT_EQ(caches.sequence_slots(0), nullptr);
}

}  // namespace
}  // namespace kvgate::kv_events
