#include "workload.hpp"

#include <gtest/gtest.h>

#include "answer.hpp"

namespace kvgate::load {
namespace {

TEST(Workload, PresetsAreDeterministicForASeedAndShareSystemPromptsInGroups) {
  WorkloadOptions options;
  options.seed = 7;
  options.sessions = 8;
  auto first = make_preset("chat", options);
  auto again = make_preset("chat", options);
  ASSERT_TRUE(first && again);
  ASSERT_EQ(first->sessions.size(), 8u);
  for (std::size_t index = 0; index < 8; ++index) {
    EXPECT_EQ(first->sessions[index].turns.size(), again->sessions[index].turns.size());
    EXPECT_EQ(first->sessions[index].turns[0].user, again->sessions[index].turns[0].user);
  }
  EXPECT_EQ(first->sessions[0].system, first->sessions[3].system);
  EXPECT_NE(first->sessions[3].system, first->sessions[4].system);
  options.seed = 8;
  EXPECT_NE(make_preset("chat", options)->sessions[0].turns[0].user, first->sessions[0].turns[0].user);
  EXPECT_FALSE(make_preset("chess", options));
}

// The tools preset: eight sessions per kind share one preamble, kinds
// differ, and the lengths are uneven (long and short sessions both there).
TEST(Workload, TheToolsPresetSharesAPreamblePerKindWithUnevenLengths) {
  WorkloadOptions options;
  options.sessions = 48;
  auto workload = make_preset("tools", options);
  ASSERT_TRUE(workload);
  ASSERT_EQ(workload->sessions.size(), 48u);
  EXPECT_EQ(workload->sessions[0].system, workload->sessions[6].system);
  EXPECT_NE(workload->sessions[0].system, workload->sessions[1].system);
  EXPECT_GT(workload->sessions[0].system.size(), 7'000u);
  std::size_t longest = 0;
  std::size_t shortest = SIZE_MAX;
  for (const auto& session : workload->sessions) {
    longest = std::max(longest, session.turns.size());
    shortest = std::min(shortest, session.turns.size());
  }
  EXPECT_GE(longest, 12u);
  EXPECT_LE(shortest, 6u);
  EXPECT_EQ(make_preset("tools", options)->sessions[5].turns[1].user, workload->sessions[5].turns[1].user);
}

// Sessions spread over adapters by Zipf: every session names one, the most
// popular adapter the most, the same for the same seed.
TEST(Workload, AdaptersAreAssignedByZipfDeterministically) {
  WorkloadOptions options;
  options.sessions = 400;
  auto workload = make_preset("chat", options);
  ASSERT_TRUE(workload);
  auto again = *workload;
  assign_adapters(*workload, 8, 1.0, 7);
  assign_adapters(again, 8, 1.0, 7);
  std::map<std::string, int> counts;
  for (std::size_t at = 0; at < workload->sessions.size(); ++at) {
    EXPECT_EQ(workload->sessions[at].model, again.sessions[at].model);
    counts[workload->sessions[at].model]++;
  }
  EXPECT_EQ(counts.size(), 8u);
  EXPECT_GT(counts["adapter-0"], counts["adapter-7"] * 3);
  EXPECT_EQ(counts.count(""), 0u);
}

TEST(Workload, SessionLinesAreReadAndBadOnesNamed) {
  auto workload = parse_workload(
      "{\"id\": \"a\", \"system\": \"sys\", \"turns\": [{\"user\": \"hi\", \"max_tokens\": 5}, {\"user\": \"more\"}]}\n"
      "\n"
      "{\"turns\": [{\"user\": \"x\", \"think_ms\": 20}]}\n",
      "file", {});
  ASSERT_TRUE(workload) << workload.error();
  ASSERT_EQ(workload->sessions.size(), 2u);
  EXPECT_EQ(workload->sessions[0].id, "a");
  EXPECT_EQ(workload->sessions[0].turns[0].max_tokens, 5u);
  EXPECT_EQ(workload->sessions[0].turns[1].max_tokens, 32u);
  EXPECT_EQ(workload->sessions[1].id, "session-3");
  EXPECT_EQ(workload->sessions[1].turns[0].think_ms, 20u);

  // A malformed line is skipped and reported by its number, or refuses the
  // file when strict.
  const std::string mixed = "{\"turns\": [{\"user\": \"x\"}]}\n{\"turns\": [{\"user\": 5}]}\nnot json\n";
  auto lenient = parse_workload(mixed, "file", {});
  ASSERT_TRUE(lenient) << lenient.error();
  EXPECT_EQ(lenient->sessions.size(), 1u);
  ASSERT_EQ(lenient->skipped.size(), 2u);
  EXPECT_TRUE(lenient->skipped[0].starts_with("line 2: ")) << lenient->skipped[0];
  EXPECT_EQ(lenient->skipped[1], "line 3: not JSON");
  WorkloadOptions strict;
  strict.strict = true;
  auto bad = parse_workload(mixed, "file", strict);
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().find("line 2"), std::string::npos) << bad.error();
  auto nothing_usable = parse_workload("not json\n", "file", {});
  ASSERT_FALSE(nothing_usable);
  EXPECT_NE(nothing_usable.error().find("line 1: not JSON"), std::string::npos) << nothing_usable.error();
  EXPECT_FALSE(parse_workload("\n\n", "file", {}));
}

// Mooncake: requests that share leading hash ids share exactly that many
// leading blocks of text, so an engine sees the prefix the trace records.
TEST(Workload, TraceRequestsShareTextExactlyWhereTheirHashIdsAgree) {
  WorkloadOptions options;
  options.trace_block_tokens = 8;  // 32 bytes per block
  options.time_scale = 2;
  auto workload = parse_workload(
      "{\"timestamp\": 0, \"input_length\": 1536, \"output_length\": 3, \"hash_ids\": [0, 1, 2]}\n"
      "{\"timestamp\": 1000, \"input_length\": 1200, \"output_length\": 0, \"hash_ids\": [0, 1, 9]}\n"
      "{\"timestamp\": 3000, \"input_length\": 100, \"output_length\": 2, \"hash_ids\": [5]}\n",
      "trace", options);
  ASSERT_TRUE(workload) << workload.error();
  ASSERT_EQ(workload->trace.size(), 3u);
  const auto& first = workload->trace[0].prompt;
  const auto& second = workload->trace[1].prompt;
  EXPECT_EQ(first.size(), 96u);
  EXPECT_EQ(second.size(), 64u + 32u * 176 / 512);  // the last block holds 176 of its 512 tokens
  EXPECT_EQ(first.substr(0, 64), second.substr(0, 64));
  EXPECT_NE(first.substr(64, 8), second.substr(64, 8));
  EXPECT_DOUBLE_EQ(workload->trace[1].arrival_ms, 500);
  EXPECT_EQ(workload->trace[1].max_tokens, 1u);  // at least one token out
  options.max_requests = 2;
  EXPECT_EQ(parse_workload("{\"timestamp\": 0, \"input_length\": 5, \"output_length\": 1, \"hash_ids\": [0]}\n"
                           "{\"timestamp\": 0, \"input_length\": 5, \"output_length\": 1, \"hash_ids\": [0]}\n"
                           "{\"timestamp\": 0, \"input_length\": 5, \"output_length\": 1, \"hash_ids\": [0]}\n",
                           "trace", options)
                ->trace.size(),
            2u);
  EXPECT_FALSE(parse_workload("{\"timestamp\": 0, \"input_length\": 5, \"hash_ids\": [0]}\n", "trace", options));
  // Output lengths scaled with the prompts, never below one token.
  options.output_scale = 4;
  auto scaled = parse_workload(
      "{\"timestamp\": 0, \"input_length\": 5, \"output_length\": 10, \"hash_ids\": [0]}\n"
      "{\"timestamp\": 1, \"input_length\": 5, \"output_length\": 1, \"hash_ids\": [0]}\n",
      "trace", options);
  ASSERT_TRUE(scaled) << scaled.error();
  EXPECT_EQ(scaled->trace[0].max_tokens, 3u);  // 2.5 rounds away from zero
  EXPECT_EQ(scaled->trace[1].max_tokens, 1u);
}

// WEKA's recorded agent sessions: ids are local to a session except the
// shared tool and system preamble; sub-agents are flattened in order.
TEST(Workload, RecordedSessionsShareOnlyThePreambleAcrossSessions) {
  WorkloadOptions options;
  options.trace_block_tokens = 4;  // 16 bytes per block
  options.time_scale = 2;
  auto line = [](const std::string& id) {
    return "{\"id\": \"" + id + "\", \"block_size\": 64, \"tool_tokens\": 100, \"system_tokens\": 60, " +
           "\"requests\": [{\"in\": 200, \"out\": 5, \"hash_ids\": [1, 2, 3], \"think_time\": 0}," +
           "{\"type\": \"subagent\", \"requests\": [{\"in\": 130, \"out\": 2, \"hash_ids\": [1, 2]}]}," +
           "{\"in\": 260, \"out\": 7, \"hash_ids\": [1, 2, 3, 4], \"think_time\": 3.0}]}\n";
  };
  auto workload = parse_workload(line("a") + line("b"), "weka", options);
  ASSERT_TRUE(workload) << workload.error();
  ASSERT_EQ(workload->sessions.size(), 2u);
  const auto& a = workload->sessions[0];
  const auto& b = workload->sessions[1];
  ASSERT_EQ(a.turns.size(), 3u);  // the sub-agent's request in between
  EXPECT_EQ(a.turns[0].max_tokens, 5u);
  EXPECT_EQ(a.turns[1].think_ms, 1500u);  // the pause before the third request, halved
  options.max_think_ms = 1000;
  EXPECT_EQ(parse_workload(line("a"), "weka", options)->sessions[0].turns[1].think_ms, 1000u);
  auto first_two = options;
  first_two.max_turns = 2;
  EXPECT_EQ(parse_workload(line("a"), "weka", first_two)->sessions[0].turns.size(), 2u);
  // 160 preamble tokens = 2 shared blocks of 64; block 3 is the session's own.
  EXPECT_EQ(a.turns[0].prompt.substr(0, 32), b.turns[0].prompt.substr(0, 32));
  EXPECT_NE(a.turns[0].prompt.substr(32, 16), b.turns[0].prompt.substr(32, 16));
  // Within a session a later request extends the earlier one's full blocks.
  EXPECT_EQ(a.turns[2].prompt.substr(0, 48), a.turns[0].prompt.substr(0, 48));
  // 200 tokens = 3 blocks + 8 tokens of tail (2 bytes, raised to one token's 4).
  EXPECT_EQ(a.turns[0].prompt.size(), 48u + 4u);
  EXPECT_FALSE(parse_workload("{\"block_size\": 64, \"requests\": [{\"out\": 1}]}\n", "weka", options));
}

// With parallel sub-agents, consecutive sub-agent entries are one fork of
// sessions that share the parent's id namespace (siblings' equal ids are
// equal text).
TEST(Workload, ParallelSubagentsBecomeOneForkOfSiblings) {
  WorkloadOptions options;
  options.trace_block_tokens = 4;
  options.parallel_subagents = true;
  const std::string line =
      R"({"id": "p", "block_size": 64, "tool_tokens": 64, "system_tokens": 0, "requests": [)"
      R"({"in": 200, "out": 5, "hash_ids": [1, 2, 3]},)"
      R"({"type": "subagent", "agent_id": "x", "requests": [{"in": 130, "out": 2, "hash_ids": [40, 41]},)"
      R"(                                                   {"in": 200, "out": 2, "hash_ids": [40, 41, 42]}]},)"
      R"({"type": "subagent", "agent_id": "y", "requests": [{"in": 130, "out": 2, "hash_ids": [40, 41]}]},)"
      R"({"in": 260, "out": 7, "hash_ids": [1, 2, 3, 4]}]})"
      "\n";
  auto workload = parse_workload(line, "weka", options);
  ASSERT_TRUE(workload) << workload.error();
  const auto& session = workload->sessions.at(0);
  ASSERT_EQ(session.turns.size(), 3u);
  EXPECT_FALSE(session.turns[0].fork());
  ASSERT_TRUE(session.turns[1].fork());
  ASSERT_EQ(session.turns[1].subagents.size(), 2u);
  EXPECT_EQ(session.turns[1].subagents[0].id, "x");
  EXPECT_EQ(session.turns[1].subagents[0].turns.size(), 2u);
  // Siblings' shared ids are shared text.
  EXPECT_EQ(session.turns[1].subagents[0].turns[0].prompt.substr(0, 32),
            session.turns[1].subagents[1].turns[0].prompt.substr(0, 32));
  EXPECT_FALSE(session.turns[2].fork());
  // Flattened (the default): the sub-agents' requests in order.
  options.parallel_subagents = false;
  EXPECT_EQ(parse_workload(line, "weka", options)->sessions.at(0).turns.size(), 5u);
}

TEST(Answer, StreamEventsGiveTheTextAndTheUsage) {
  Answer answer;
  read_events(
      "data: {\"choices\":[{\"delta\":{\"role\":\"assistant\"}}]}\n\n"
      "data: {\"choices\":[{\"delta\":{\"content\":\"Hel\"}}]}\n\n"
      "data: {\"choices\":[{\"delta\":{\"content\":\"lo\"}}]}\n\n"
      "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":40,\"completion_tokens\":2,"
      "\"prompt_tokens_details\":{\"cached_tokens\":32}}}\n\n"
      "data: [DONE]\n\n",
      answer);
  EXPECT_EQ(answer.text, "Hello");
  EXPECT_EQ(answer.prompt_tokens, 40u);
  EXPECT_EQ(answer.cached_tokens, 32u);
  EXPECT_EQ(answer.output_tokens, 2u);
  EXPECT_TRUE(answer.error.empty());

  Answer completion;
  read_events("data: {\"choices\":[{\"text\":\"abc\"}]}\n\ndata: {\"error\":{\"message\":\"gone\"}}\n\n", completion);
  EXPECT_EQ(completion.text, "abc");
  EXPECT_EQ(completion.error, "stream_error");
}

}  // namespace
}  // namespace kvgate::load
