// The event stream's protocol logic on its own: batches, replay frames and
// ticks in, actions out. Every case of sequence_tracker.hpp's rules.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "kvgate/kv_events/sequence_tracker.hpp"

namespace kvgate::kv_events {
namespace {

using Kind = SequenceAction::Kind;

SequenceSettings with_replay(bool replay = true) {
  SequenceSettings settings;
  settings.replay_available = replay;
  settings.replay_timeout_ms = 1'000;
  settings.approximate_ttl_ms = 60'000;
  settings.silence_after_ms = 10'000;
  settings.max_held_batches = 4;
  return settings;
}

EventMessage batch(std::uint64_t sequence) {
  return {sequence, "payload-" + std::to_string(sequence)};
}

// A compact transcript: "apply:3", "gap:2>5", "replay:2", "restart", ...
std::vector<std::string> transcript(const SequenceActions& actions) {
  std::vector<std::string> lines;
  for (const auto& action : actions) {
    switch (action.kind) {
      case Kind::apply:
        lines.push_back("apply:" + std::to_string(action.message.sequence));
        EXPECT_EQ(action.message.payload, "payload-" + std::to_string(action.message.sequence));
        break;
      case Kind::gap:
        lines.push_back("gap:" + std::to_string(action.expected) + ">" + std::to_string(action.got));
        break;
      case Kind::engine_restarted:
        lines.emplace_back("restart");
        break;
      case Kind::request_replay:
        lines.push_back("replay:" + std::to_string(action.expected));
        break;
      case Kind::replay_finished:
        lines.push_back(std::string(action.closed ? "closed" : "failed") + (action.late_join ? ",late" : "") +
                        (action.timed_out ? ",timeout" : ""));
        break;
      case Kind::reopen_replay_socket:
        lines.emplace_back("reopen");
        break;
      case Kind::stale_started:
        lines.emplace_back("stale");
        break;
      case Kind::stale_ended:
        lines.emplace_back("fresh");
        break;
      case Kind::silent_started:
        lines.emplace_back("silent");
        break;
      case Kind::silent_ended:
        lines.emplace_back("speaking");
        break;
    }
  }
  return lines;
}

using Lines = std::vector<std::string>;

TEST(SequenceTracker, BatchesInOrderAreApplied) {
  SequenceTracker tracker(with_replay(), 0);
  EXPECT_EQ(transcript(tracker.on_live(batch(0), 1)), Lines{"apply:0"});
  EXPECT_EQ(transcript(tracker.on_live(batch(1), 2)), Lines{"apply:1"});
  EXPECT_EQ(transcript(tracker.on_live(batch(2), 3)), Lines{"apply:2"});
  EXPECT_EQ(tracker.last_sequence(), 2u);
}

// A restart another source reported (the engine's counters went down):
// the next batch starts the stream again even when its sequence looks like
// the next one (the new engine's first batch was lost), or like a gap.
TEST(SequenceTracker, ARestartReportedElsewhereStartsTheStreamAgain) {
  SequenceTracker tracker(with_replay(), 0);
  EXPECT_EQ(transcript(tracker.on_live(batch(0), 1)), Lines{"apply:0"});
  EXPECT_EQ(transcript(tracker.on_live(batch(1), 2)), Lines{"apply:1"});
  tracker.on_engine_restarted();
  EXPECT_EQ(transcript(tracker.on_live(batch(2), 3)), (Lines{"replay:0"}));
  SequenceTracker plain(with_replay(false), 0);
  EXPECT_EQ(transcript(plain.on_live(batch(1), 1)), Lines{"apply:1"});
  plain.on_engine_restarted();
  EXPECT_EQ(transcript(plain.on_live(batch(5), 2)), Lines{"apply:5"});
  EXPECT_EQ(transcript(plain.on_live(batch(6), 3)), Lines{"apply:6"});
}

TEST(SequenceTracker, AGapIsReplayedThenTheHeldBatchesFollowInOrder) {
  SequenceTracker tracker(with_replay(), 0);
  tracker.on_live(batch(0), 1);
  EXPECT_EQ(transcript(tracker.on_live(batch(3), 2)), (Lines{"gap:1>3", "replay:1"}));
  EXPECT_TRUE(tracker.replaying());
  EXPECT_TRUE(transcript(tracker.on_live(batch(4), 3)).empty());  // held back
  EXPECT_EQ(transcript(tracker.on_replay(batch(1), 4)), Lines{"apply:1"});
  EXPECT_EQ(transcript(tracker.on_replay(batch(2), 5)), Lines{"apply:2"});
  EXPECT_EQ(transcript(tracker.on_replay(batch(3), 6)), Lines{"apply:3"});  // also held: applied once
  EXPECT_EQ(transcript(tracker.on_replay({kEndOfReplay, ""}, 7)), (Lines{"apply:4", "closed"}));
  EXPECT_FALSE(tracker.replaying());
  EXPECT_FALSE(tracker.stale());
  EXPECT_EQ(transcript(tracker.on_live(batch(5), 8)), Lines{"apply:5"});
}

TEST(SequenceTracker, APartialReplayMarksTheWorkerStale) {
  SequenceTracker tracker(with_replay(), 0);
  tracker.on_live(batch(0), 1);
  tracker.on_live(batch(5), 2);
  // The engine's buffer starts at 3: 1 and 2 are lost.
  EXPECT_EQ(transcript(tracker.on_replay(batch(3), 3)), Lines{"apply:3"});
  EXPECT_EQ(transcript(tracker.on_replay(batch(4), 4)), Lines{"apply:4"});
  EXPECT_EQ(transcript(tracker.on_replay({kEndOfReplay, ""}, 5)), (Lines{"apply:5", "failed", "stale"}));
  EXPECT_TRUE(tracker.stale());
  EXPECT_TRUE(transcript(tracker.on_tick(60'004)).empty());
  EXPECT_EQ(transcript(tracker.on_tick(60'005)), Lines{"fresh"});
  EXPECT_FALSE(tracker.stale());
}

TEST(SequenceTracker, AReplayThatNeverEndsTimesOut) {
  SequenceTracker tracker(with_replay(), 0);
  tracker.on_live(batch(0), 1);
  tracker.on_live(batch(2), 100);
  EXPECT_TRUE(transcript(tracker.on_tick(1'099)).empty());
  EXPECT_EQ(transcript(tracker.on_tick(1'100)), (Lines{"apply:2", "reopen", "failed,timeout", "stale"}));
  // A late frame of the abandoned replay is ignored.
  EXPECT_TRUE(transcript(tracker.on_replay(batch(1), 1'200)).empty());
  EXPECT_EQ(transcript(tracker.on_live(batch(3), 1'300)), Lines{"apply:3"});
}

TEST(SequenceTracker, AReplayHoldingTooManyLiveBatchesIsAbandoned) {
  SequenceTracker tracker(with_replay(), 0);
  tracker.on_live(batch(0), 1);
  tracker.on_live(batch(2), 2);  // held: 1
  tracker.on_live(batch(3), 3);
  tracker.on_live(batch(4), 4);
  tracker.on_live(batch(5), 5);  // held: 4 (the limit)
  EXPECT_EQ(transcript(tracker.on_live(batch(6), 6)),
            (Lines{"apply:2", "apply:3", "apply:4", "apply:5", "apply:6", "reopen", "failed", "stale"}));
}

TEST(SequenceTracker, WithoutAReplaySocketAGapIsStaleAtOnce) {
  SequenceTracker tracker(with_replay(false), 0);
  tracker.on_live(batch(0), 1);
  EXPECT_EQ(transcript(tracker.on_live(batch(2), 2)), (Lines{"gap:1>2", "stale", "apply:2"}));
  EXPECT_TRUE(tracker.stale());
  // A second gap while stale extends it (and forgets again).
  EXPECT_EQ(transcript(tracker.on_live(batch(9), 30'000)), (Lines{"gap:3>9", "stale", "apply:9"}));
  EXPECT_TRUE(transcript(tracker.on_tick(60'001)).empty());
  EXPECT_EQ(transcript(tracker.on_tick(90'000)), Lines{"fresh"});
}

TEST(SequenceTracker, ADuplicateOrOlderSequenceIsARestart) {
  SequenceTracker tracker(with_replay(false), 0);
  tracker.on_live(batch(0), 1);
  tracker.on_live(batch(1), 2);
  EXPECT_EQ(transcript(tracker.on_live(batch(1), 3)), (Lines{"restart", "apply:1"}));
  EXPECT_EQ(transcript(tracker.on_live(batch(0), 4)), (Lines{"restart", "apply:0"}));
  EXPECT_EQ(transcript(tracker.on_live(batch(1), 5)), Lines{"apply:1"});
}

TEST(SequenceTracker, ARestartedEngineWithAReplaySocketIsReplayedFromZero) {
  SequenceTracker tracker(with_replay(), 0);
  tracker.on_live(batch(0), 1);
  tracker.on_live(batch(1), 2);
  tracker.on_live(batch(2), 3);
  // The publisher went away; the engine came back and has published twice.
  tracker.on_disconnected();
  EXPECT_EQ(transcript(tracker.on_live(batch(5), 4)), (Lines{"restart", "replay:0"}));
  tracker.on_replay(batch(0), 5);
  EXPECT_EQ(transcript(tracker.on_replay({kEndOfReplay, ""}, 6)), (Lines{"apply:5", "failed,late"}));
  EXPECT_FALSE(tracker.stale());  // a late join under-reports, it never claims blocks that are gone
}

TEST(SequenceTracker, TheNextBatchAfterAReconnectIsNotARestart) {
  SequenceTracker tracker(with_replay(false), 0);
  tracker.on_live(batch(0), 1);
  tracker.on_disconnected();
  EXPECT_EQ(transcript(tracker.on_live(batch(1), 2)), Lines{"apply:1"});
}

TEST(SequenceTracker, AFirstBatchAboveZeroIsALateJoinReplayedFromZero) {
  SequenceTracker tracker(with_replay(), 0);
  EXPECT_EQ(transcript(tracker.on_live(batch(7), 1)), Lines{"replay:0"});
  for (std::uint64_t sequence = 0; sequence < 7; ++sequence) {
    tracker.on_replay(batch(sequence), 2);
  }
  EXPECT_EQ(transcript(tracker.on_replay({kEndOfReplay, ""}, 3)), (Lines{"apply:7", "closed,late"}));
  // Without a replay socket there is nothing to ask: applied as it comes.
  SequenceTracker plain(with_replay(false), 0);
  EXPECT_EQ(transcript(plain.on_live(batch(7), 1)), Lines{"apply:7"});
}

TEST(SequenceTracker, RoutedBlocksWithoutEventsMakeTheStreamSilentUntilABatchComes) {
  SequenceTracker tracker(with_replay(false), 0);
  tracker.on_live(batch(0), 1'000);
  EXPECT_TRUE(transcript(tracker.on_tick(50'000)).empty());  // no traffic: quiet is fine
  tracker.on_routed(12, 50'000);
  EXPECT_TRUE(transcript(tracker.on_tick(59'999)).empty());
  EXPECT_EQ(transcript(tracker.on_tick(60'000)), Lines{"silent"});
  EXPECT_TRUE(transcript(tracker.on_tick(70'000)).empty());  // reported once
  EXPECT_TRUE(tracker.silent());
  EXPECT_EQ(transcript(tracker.on_live(batch(1), 71'000)), (Lines{"apply:1", "speaking"}));
  EXPECT_FALSE(tracker.silent());
  tracker.on_routed(0, 72'000);  // nothing new routed: no clock starts
  EXPECT_TRUE(transcript(tracker.on_tick(200'000)).empty());
}

}  // namespace
}  // namespace kvgate::kv_events
