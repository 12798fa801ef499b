#include <gtest/gtest.h>

#include <string>
#include <thread>
#include <vector>

#include "kvgate/route/session_table.hpp"

namespace kvgate::route {
namespace {

SessionTurn turn_on(const std::string& worker, std::uint32_t input_tokens = 100) {
  SessionTurn turn;
  turn.worker = worker;
  turn.reason = policy::Reason::sticky;
  turn.input_tokens = input_tokens;
  return turn;
}

TEST(SessionTable, RemembersTheLastWorkerAndCountsTurns) {
  SessionTable table({100, 60'000, 4});
  EXPECT_FALSE(table.find("s", 1'000));
  EXPECT_EQ(table.commit_turn("s", turn_on("a", 100), 1'000), 1u);
  EXPECT_EQ(table.commit_turn("s", turn_on("b", 180), 2'000), 2u);
  auto state = table.find("s", 2'500);
  ASSERT_TRUE(state);
  EXPECT_EQ(state->worker, "b");
  EXPECT_EQ(state->turns, 2u);
  EXPECT_EQ(state->last_input_tokens, 180u);
  EXPECT_EQ(state->last_seen_ms, 2'000u);
  EXPECT_FALSE(state->expired);
}

// The answer's length and time belong to the session's last turn: a later
// turn clears them, and an older turn's answer read late does not set them.
TEST(SessionTable, KeepsTheLastTurnsAnswerUntilTheNextTurn) {
  SessionTable table;
  const auto first = table.commit_turn("s", turn_on("a"), 1000);
  EXPECT_FALSE(table.find("s", 1000)->last_answer_tokens);
  EXPECT_FALSE(table.find("s", 1000)->last_answered_ms);
  table.record_answer("s", first, 32, 1'500);
  EXPECT_EQ(table.find("s", 1501)->last_answer_tokens, 32u);
  EXPECT_EQ(table.find("s", 1501)->last_answered_ms, 1'500u);
  const auto second = table.commit_turn("s", turn_on("a", 180), 2000);
  EXPECT_FALSE(table.find("s", 2000)->last_answer_tokens);
  EXPECT_FALSE(table.find("s", 2000)->last_answered_ms);
  table.record_answer("s", first, 32, 2'000);
  EXPECT_FALSE(table.find("s", 2001)->last_answer_tokens);
  EXPECT_FALSE(table.find("s", 2001)->last_answered_ms);
  // An answer without the engine's usage still says when it ended.
  table.record_answer("s", second, std::nullopt, 2'002);
  EXPECT_FALSE(table.find("s", 2002)->last_answer_tokens);
  EXPECT_EQ(table.find("s", 2002)->last_answered_ms, 2'002u);
  table.record_answer("s", second, 0, 2'003);
  EXPECT_EQ(table.find("s", 2003)->last_answer_tokens, 0u);
  table.record_answer("unknown", 1, 10, 2'003);
  EXPECT_FALSE(table.find("unknown", 2003));
}

TEST(SessionTable, RecentListsTheLatestLiveSessionsNewestFirstWithTheirLastTurn) {
  SessionTable table({1'000, 10'000, 4});
  for (int key = 0; key < 50; ++key) {
    table.commit_turn("s" + std::to_string(key), turn_on("w" + std::to_string(key % 3)), 1'000 + key);
  }
  table.commit_turn("s7", turn_on("w9", 321), 5'000);
  table.record_outcome("s7", 2, {200, 300, 321, 12.5});
  auto recent = table.recent(5, 6'000);
  ASSERT_EQ(recent.size(), 5u);
  EXPECT_EQ(recent[0].key, "s7");
  EXPECT_EQ(recent[0].state.turns, 2u);
  EXPECT_EQ(recent[0].state.worker, "w9");
  ASSERT_TRUE(recent[0].last_turn);
  EXPECT_EQ(recent[0].last_turn->cached_tokens, 300u);
  EXPECT_EQ(recent[1].key, "s49");
  EXPECT_EQ(recent[4].key, "s46");
  // Past the idle TTL only the session seen at 5 s is left.
  recent = table.recent(5, 14'000);
  ASSERT_EQ(recent.size(), 1u);
  EXPECT_EQ(recent[0].key, "s7");
  EXPECT_TRUE(table.recent(5, 100'000).empty());
}

TEST(SessionTable, FindHasNoSideEffects) {
  SessionTable table({2, 60'000, 4});
  table.commit_turn("old", turn_on("a"), 1'000);
  table.commit_turn("new", turn_on("a"), 2'000);
  // Looking at "old" must not make it the most recently used one.
  ASSERT_TRUE(table.find("old", 3'000));
  for (int key = 0; key < 40; ++key) {
    table.commit_turn("other-" + std::to_string(key), turn_on("a"), 4'000 + key);
  }
  EXPECT_FALSE(table.find("old", 5'000));
}

TEST(SessionTable, AnIdleSessionExpiresAndStartsOver) {
  SessionTable table({100, 10'000, 4});
  table.commit_turn("s", turn_on("a"), 1'000);
  table.commit_turn("s", turn_on("a"), 2'000);
  EXPECT_FALSE(table.find("s", 12'000)->expired);
  EXPECT_TRUE(table.find("s", 12'001)->expired);
  EXPECT_EQ(table.active(12'001), 0u);
  EXPECT_EQ(table.commit_turn("s", turn_on("b"), 20'000), 1u);  // a new session under the same key
  auto detail = table.detail("s", 20'000);
  ASSERT_TRUE(detail);
  EXPECT_EQ(detail->turns.size(), 1u);
  EXPECT_EQ(detail->started_ms, 20'000u);
  EXPECT_EQ(table.active(20'000), 1u);
}

TEST(SessionTable, KeepsTheLastTurnsWithTheirOutcomes) {
  SessionTable table({100, 60'000, 3});
  for (int turn = 1; turn <= 5; ++turn) {
    auto routed = turn_on("a", 100 * turn);
    routed.predicted_cached_tokens = 96 * (turn - 1);
    EXPECT_EQ(table.commit_turn("s", routed, 1'000 * turn), static_cast<std::uint64_t>(turn));
  }
  table.record_outcome("s", 5, {200, 384, 500, 12.5});
  table.record_outcome("s", 1, {200, 0, 100, 3.0});  // no longer kept: ignored
  auto detail = table.detail("s", 6'000);
  ASSERT_TRUE(detail);
  ASSERT_EQ(detail->turns.size(), 3u);
  EXPECT_EQ(detail->turns.front().number, 3u);
  EXPECT_EQ(detail->turns.back().number, 5u);
  EXPECT_EQ(detail->turns.back().cached_tokens, 384u);
  EXPECT_EQ(detail->turns.back().prompt_tokens, 500u);
  EXPECT_EQ(detail->turns.back().ttft_ms, 12.5);
  EXPECT_EQ(detail->turns.back().status, 200);
  EXPECT_FALSE(detail->turns[1].cached_tokens);
  EXPECT_EQ(detail->state.turns, 5u);
}

// The seed's practical-test fields: KV usage when routed, decode time when
// done; and where the key came from, kept per session.
TEST(SessionTable, KeepsTheKeySourceAndEachTurnsKvUsageAndDecodeTime) {
  SessionTable table({100, 60'000, 4});
  auto routed = turn_on("a");
  routed.kv_usage = 0.25;
  table.commit_turn("s", routed, 1'000, false, "header:x-claude-code-session-id");
  table.record_outcome("s", 1, {200, 0, 100, 8.0, 41.5});
  auto detail = table.detail("s", 1'500);
  ASSERT_TRUE(detail);
  EXPECT_EQ(detail->key_source, "header:x-claude-code-session-id");
  EXPECT_EQ(detail->turns.back().kv_usage, 0.25);
  EXPECT_EQ(detail->turns.back().decode_ms, 41.5);
  // A later turn whose key came from elsewhere says so.
  table.commit_turn("s", turn_on("a"), 2'000, false, "body:user");
  EXPECT_EQ(table.detail("s", 2'500)->key_source, "body:user");
  EXPECT_FALSE(table.detail("s", 2'500)->turns.back().kv_usage);
  EXPECT_EQ(table.recent(1, 2'500).front().key_source, "body:user");
}

std::vector<std::uint64_t> blocks_from(std::uint64_t first, std::size_t count) {
  std::vector<std::uint64_t> blocks;
  for (std::size_t at = 0; at < count; ++at) {
    blocks.push_back(first + at);
  }
  return blocks;
}

std::vector<std::uint64_t> joined(std::vector<std::uint64_t> head, const std::vector<std::uint64_t>& tail) {
  head.insert(head.end(), tail.begin(), tail.end());
  return head;
}

// A sub-agent or a fork: its first prompt continues a live session's
// history past that session's first prompt. The parent is found from the
// blocks alone; siblings that share the fork's text all name the parent,
// and a session that shares only the preamble every session sends names
// none.
TEST(SessionTable, ASessionThatContinuesAnothersHistoryIsItsChild) {
  SessionTable table({100, 60'000, 4});
  const auto preamble = blocks_from(1, 8);
  const auto first_prompt = joined(preamble, blocks_from(100, 4));  // 12 blocks
  const auto history = joined(first_prompt, blocks_from(200, 12));  // 24 blocks
  table.commit_turn("parent", turn_on("a"), 1'000, false, "header:x-session-id", first_prompt);
  table.commit_turn("parent", turn_on("a"), 2'000, false, "header:x-session-id", history);
  // Another conversation: the same preamble, then its own text.
  table.commit_turn("stranger", turn_on("b"), 2'100, false, {}, joined(preamble, blocks_from(900, 30)));
  EXPECT_EQ(table.detail("stranger", 2'200)->parent, "");
  // Two sub-agents forked from the parent's history, the same fork text.
  const auto fork = joined(history, blocks_from(500, 10));
  table.commit_turn("child-1", turn_on("b"), 2'300, false, {}, fork);
  table.commit_turn("child-2", turn_on("c"), 2'400, false, {}, fork);
  EXPECT_EQ(table.detail("child-1", 2'500)->parent, "parent");
  EXPECT_EQ(table.detail("child-2", 2'500)->parent, "parent");
  EXPECT_EQ(table.detail("parent", 2'500)->children, 2u);
  // The parent's own later turns are not its children; a child's later
  // turns keep the link.
  table.commit_turn("parent", turn_on("a"), 2'600, false, {}, joined(history, blocks_from(300, 8)));
  table.commit_turn("child-1", turn_on("b"), 2'700, false, {}, joined(fork, blocks_from(600, 4)));
  EXPECT_EQ(table.detail("parent", 2'800)->parent, "");
  EXPECT_EQ(table.detail("parent", 2'800)->children, 2u);
  EXPECT_EQ(table.detail("child-1", 2'800)->parent, "parent");
  EXPECT_EQ(table.recent(10, 2'800).front().parent, "parent");
  // A parent idle past the TTL is nobody's parent any more.
  table.commit_turn("late-child", turn_on("d"), 70'000, false, {}, fork);
  EXPECT_EQ(table.detail("late-child", 70'100)->parent, "");
}

// A flood of distinct prompts keeps the anchors within their bound.
TEST(SessionTable, AnchorsStayBoundedUnderAFloodOfSessions) {
  SessionTable table({64, 60'000, 2});
  for (std::uint64_t session = 0; session < 20'000; ++session) {
    table.commit_turn("s" + std::to_string(session), turn_on("a"), 1'000 + session, false, {},
                      blocks_from(session * 1'000'000, 64));
  }
  EXPECT_LE(table.size(), 64u);
  EXPECT_LE(table.anchors(), 64u * 16);
}

TEST(SessionTable, ARetryReplacesItsTurnInsteadOfAddingOne) {
  SessionTable table({100, 60'000, 4});
  table.commit_turn("s", turn_on("a"), 1'000);
  auto moved = turn_on("b");
  moved.reason = policy::Reason::retry;
  EXPECT_EQ(table.commit_turn("s", moved, 1'100, /*same_request=*/true), 1u);
  auto detail = table.detail("s", 1'200);
  ASSERT_EQ(detail->turns.size(), 1u);
  EXPECT_EQ(detail->turns[0].worker, "b");
  EXPECT_EQ(detail->turns[0].reason, policy::Reason::retry);
  EXPECT_EQ(detail->state.worker, "b");
}

TEST(SessionTable, LongKeysAreStoredAsTheirHash) {
  SessionTable table;
  const std::string long_key(10'000, 'k');
  table.commit_turn(long_key, turn_on("a"), 1'000);
  auto detail = table.detail(long_key, 1'000);
  ASSERT_TRUE(detail);
  EXPECT_LE(detail->key.size(), kMaxKeyBytes);
  EXPECT_TRUE(detail->key.starts_with("xxh3:"));
  EXPECT_EQ(session_table_key(long_key), detail->key);
  EXPECT_FALSE(table.find(std::string(10'000, 'j'), 1'000));  // another long key is another session
  EXPECT_EQ(session_table_key("short"), "short");
}

// A flood of distinct keys (one per request, as a broken client or an
// attacker would send) never grows the table past its cap; the oldest go.
TEST(SessionTable, AMillionDistinctKeysStayWithinTheCap) {
  constexpr std::uint32_t kCap = 4'096;
  SessionTable table({kCap, 3'600'000, 8});
  for (std::uint64_t key = 0; key < 1'000'000; ++key) {
    table.commit_turn("flood-" + std::to_string(key), turn_on("a"), 1'000 + key / 1'000);
  }
  EXPECT_LE(table.size(), kCap);
  EXPECT_GE(table.size(), kCap * 9 / 10);  // the shards fill evenly
  EXPECT_TRUE(table.find("flood-999999", 3'000));
  EXPECT_FALSE(table.find("flood-0", 3'000));
  EXPECT_FALSE(table.find("flood-500000", 3'000));
}

TEST(SessionTable, ASmallerCapTakesEffectOnTheNextInserts) {
  SessionTable table({1'000, 3'600'000, 8});
  for (int key = 0; key < 1'000; ++key) {
    table.commit_turn("k" + std::to_string(key), turn_on("a"), 1'000);
  }
  table.set_limits({64, 3'600'000, 8});
  for (int key = 0; key < 1'000; ++key) {
    table.commit_turn("n" + std::to_string(key), turn_on("a"), 2'000);
  }
  EXPECT_LE(table.size(), 64u);
}

}  // namespace
}  // namespace kvgate::route

namespace kvgate::route {
namespace {

// Every I/O thread and the admin thread use the table at once (the
// ThreadSanitizer stage runs this).
TEST(SessionTable, ThreadsCommittingReadingAndListingAtOnceStayConsistent) {
  SessionTable table({512, 3'600'000, 4});
  std::vector<std::thread> threads;
  for (int thread = 0; thread < 4; ++thread) {
    threads.emplace_back([&table, thread] {
      for (int request = 0; request < 5'000; ++request) {
        const auto key = "s" + std::to_string((request * 7 + thread) % 300);
        SessionTurn turn;
        turn.worker = "w" + std::to_string(thread);
        const auto number = table.commit_turn(key, turn, 1'000 + request);
        table.record_outcome(key, number, {200, 16u, 64u, 1.0});
        (void)table.find(key, 1'000 + request);
        if (request % 500 == 0) {
          (void)table.active(1'000 + request);
          (void)table.detail(key, 1'000 + request);
        }
      }
    });
  }
  for (auto& thread : threads) {
    thread.join();
  }
  EXPECT_EQ(table.size(), 300u);
  auto detail = table.detail("s0", 10'000);
  ASSERT_TRUE(detail);
  EXPECT_LE(detail->turns.size(), 4u);
  EXPECT_GT(detail->state.turns, 0u);
}

}  // namespace
}  // namespace kvgate::route

namespace kvgate::route {
namespace {

SessionTurn peer_turn(const std::string& worker, std::uint64_t number, std::uint64_t at_ms) {
  auto turn = turn_on(worker);
  turn.number = number;
  turn.at_ms = at_ms;
  return turn;
}

// Another replica's turns (cluster/): they continue the session's history
// with the peer's numbers, interleave with this replica's own, and a
// duplicate or a number already held changes nothing.
TEST(SessionTable, PeersTurnsContinueOneHistory) {
  SessionTable table({100, 60'000, 8});
  EXPECT_TRUE(table.apply_peer_turn("s", peer_turn("a", 1, 900), 1'000, false, "header:x-session-id"));
  auto state = table.find("s", 1'000);
  ASSERT_TRUE(state);
  EXPECT_EQ(state->worker, "a");
  EXPECT_EQ(state->turns, 1u);
  EXPECT_EQ(state->last_seen_ms, 900u);
  // This replica's own next turn is number 2.
  EXPECT_EQ(table.commit_turn("s", turn_on("a"), 2'000), 2u);
  // The peer's turn 3, then a duplicate of it and a stale turn 2.
  EXPECT_TRUE(table.apply_peer_turn("s", peer_turn("a", 3, 2'900), 3'000, false, ""));
  EXPECT_FALSE(table.apply_peer_turn("s", peer_turn("b", 3, 2'950), 3'000, false, ""));
  EXPECT_FALSE(table.apply_peer_turn("s", peer_turn("b", 2, 2'950), 3'000, false, ""));
  // A retry of the last turn replaces its worker.
  EXPECT_TRUE(table.apply_peer_turn("s", peer_turn("c", 3, 2'990), 3'000, true, ""));
  // A turn stamped in this replica's future (a clock step) counts as now.
  EXPECT_TRUE(table.apply_peer_turn("s", peer_turn("c", 4, 9'000), 4'000, false, ""));
  auto detail = table.detail("s", 4'000);
  ASSERT_TRUE(detail);
  EXPECT_EQ(detail->state.turns, 4u);
  EXPECT_EQ(detail->state.worker, "c");
  EXPECT_EQ(detail->state.last_seen_ms, 4'000u);
  ASSERT_EQ(detail->turns.size(), 4u);
  std::vector<std::string> workers;
  for (const auto& turn : detail->turns) {
    workers.push_back(turn.worker + std::to_string(turn.number));
  }
  EXPECT_EQ(workers, (std::vector<std::string>{"a1", "a2", "c3", "c4"}));
  // Its outcome is recorded on the turn the peer named.
  table.record_outcome("s", 3, {200, 64, 100, 8.5, 20});
  EXPECT_EQ(table.detail("s", 4'000)->turns[2].cached_tokens, 64u);
}

TEST(SessionTable, APeersTurnAfterTheIdleTtlStartsTheSessionOver) {
  SessionTable table({100, 1'000, 8});
  EXPECT_EQ(table.commit_turn("s", turn_on("a"), 0), 1u);
  EXPECT_EQ(table.commit_turn("s", turn_on("a"), 100), 2u);
  // Expired by the time the peer routed its turn 1 of a new session.
  EXPECT_TRUE(table.apply_peer_turn("s", peer_turn("b", 1, 5'000), 5'000, false, ""));
  auto detail = table.detail("s", 5'000);
  ASSERT_TRUE(detail);
  EXPECT_EQ(detail->state.turns, 1u);
  EXPECT_EQ(detail->turns.size(), 1u);
  EXPECT_EQ(detail->started_ms, 5'000u);
}

}  // namespace
}  // namespace kvgate::route
