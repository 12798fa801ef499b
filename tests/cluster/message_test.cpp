// The cluster's wire format: every kind survives a round trip; bytes that
// are not a whole message of a known version are refused with the reason,
// never read past their end.
#include "kvgate/cluster/message.hpp"

#include <gtest/gtest.h>

#include <fstream>
#include <iterator>
#include <string>

namespace kvgate::cluster {
namespace {

std::string with_header(MessageKind kind) {
  std::string bytes;
  encode_header(bytes, kind, 1'796'000'000'123, "replica-a", 7);
  return bytes;
}

TEST(ClusterMessage, ATurnRoundTrips) {
  auto bytes = with_header(MessageKind::turn);
  TurnMessage turn{"qwen3",
                   "session-7",
                   "header:x-session-id",
                   4,
                   "gpu-1",
                   "prefill-0",
                   policy::Reason::moved_queue,
                   policy::Reason::remote_prefill,
                   5'000,
                   4'096,
                   0.625,
                   true};
  encode(bytes, turn);
  auto decoded = decode(bytes);
  ASSERT_TRUE(decoded);
  EXPECT_EQ(decoded->kind, MessageKind::turn);
  EXPECT_EQ(decoded->sent_unix_ms, 1'796'000'000'123u);
  EXPECT_EQ(decoded->from, "replica-a");
  EXPECT_EQ(decoded->incarnation, 7u);
  const auto& got = std::get<TurnMessage>(decoded->body);
  EXPECT_EQ(got.model, "qwen3");
  EXPECT_EQ(got.key, "session-7");
  EXPECT_EQ(got.key_source, "header:x-session-id");
  EXPECT_EQ(got.number, 4u);
  EXPECT_EQ(got.worker, "gpu-1");
  EXPECT_EQ(got.prefill_worker, "prefill-0");
  EXPECT_EQ(got.reason, policy::Reason::moved_queue);
  EXPECT_EQ(got.prefill, policy::Reason::remote_prefill);
  EXPECT_EQ(got.input_tokens, 5'000u);
  EXPECT_EQ(got.predicted_cached_tokens, 4'096u);
  ASSERT_TRUE(got.kv_usage);
  EXPECT_DOUBLE_EQ(*got.kv_usage, 0.625);
  EXPECT_TRUE(got.retry);
}

TEST(ClusterMessage, OptionalFieldsStayAbsent) {
  auto bytes = with_header(MessageKind::turn);
  encode(bytes,
         TurnMessage{"m", "k", "", 1, "w", "", policy::Reason::new_session, std::nullopt, 10, 0, std::nullopt, false});
  auto decoded = decode(bytes);
  ASSERT_TRUE(decoded);
  const auto& turn = std::get<TurnMessage>(decoded->body);
  EXPECT_FALSE(turn.prefill);
  EXPECT_FALSE(turn.kv_usage);
  EXPECT_FALSE(turn.retry);

  bytes = with_header(MessageKind::outcome);
  encode(bytes, OutcomeMessage{"m", "k", 3, 200, 96, std::nullopt, 41.25, std::nullopt});
  decoded = decode(bytes);
  ASSERT_TRUE(decoded);
  const auto& outcome = std::get<OutcomeMessage>(decoded->body);
  EXPECT_EQ(outcome.status, 200);
  EXPECT_EQ(outcome.cached_tokens, 96u);
  EXPECT_FALSE(outcome.prompt_tokens);
  ASSERT_TRUE(outcome.ttft_ms);
  EXPECT_DOUBLE_EQ(*outcome.ttft_ms, 41.25);
  EXPECT_FALSE(outcome.decode_ms);
}

// A withdrawal of a prompt shorter than a block carries no blocks (found
// by the fuzzer: the empty list's storage must not reach memcpy).
TEST(ClusterMessage, ABlocksMessageWithNoBlocksRoundTrips) {
  auto bytes = with_header(MessageKind::withdrawn);
  encode(bytes, BlocksMessage{"m", "w1", 9, {}});
  auto decoded = decode(bytes);
  ASSERT_TRUE(decoded);
  const auto& got = std::get<BlocksMessage>(decoded->body);
  EXPECT_EQ(got.worker, "w1");
  EXPECT_EQ(got.ticket, 9u);
  EXPECT_TRUE(got.blocks.empty());
}

TEST(ClusterMessage, BlocksFinishedAndLoadRoundTrip) {
  const std::vector<std::uint64_t> blocks{0, 1, 0xffff'ffff'ffff'ffffULL, 0x0123'4567'89ab'cdefULL};
  for (auto kind : {MessageKind::assumed, MessageKind::withdrawn}) {
    auto bytes = with_header(kind);
    encode_blocks(bytes, "m", "w2", 1ULL << 40, blocks.data(), blocks.size());
    auto decoded = decode(bytes);
    ASSERT_TRUE(decoded);
    EXPECT_EQ(decoded->kind, kind);
    const auto& got = std::get<BlocksMessage>(decoded->body);
    EXPECT_EQ(got.worker, "w2");
    EXPECT_EQ(got.ticket, 1ULL << 40);
    EXPECT_EQ(got.blocks, blocks);
  }
  auto bytes = with_header(MessageKind::finished);
  encode(bytes, FinishedMessage{"m", "w0", 77});
  auto decoded = decode(bytes);
  ASSERT_TRUE(decoded);
  EXPECT_EQ(std::get<FinishedMessage>(decoded->body).ticket, 77u);

  bytes = with_header(MessageKind::load);
  LoadMessage load{{{"w0", 3, 12'000, 2, 30'000}, {"w1", 0, 0, 0, 0}}};
  encode(bytes, load);
  decoded = decode(bytes);
  ASSERT_TRUE(decoded);
  EXPECT_EQ(std::get<LoadMessage>(decoded->body).workers, load.workers);
}

// A session's answered turn, with the answer's length or without (an
// engine that did not say); a flag past the one field, an empty key or a
// turn numbered 0 is refused.
TEST(ClusterMessage, AnAnsweredTurnRoundTrips) {
  auto bytes = with_header(MessageKind::answered);
  encode(bytes, AnsweredMessage{"chat-3", 4, 48});
  auto decoded = decode(bytes);
  ASSERT_TRUE(decoded);
  EXPECT_EQ(decoded->kind, MessageKind::answered);
  const auto& got = std::get<AnsweredMessage>(decoded->body);
  EXPECT_EQ(got.key, "chat-3");
  EXPECT_EQ(got.number, 4u);
  EXPECT_EQ(got.answer_tokens, 48u);
  for (std::size_t size = 0; size < bytes.size(); ++size) {
    EXPECT_EQ(decode(std::string_view(bytes).substr(0, size)).error(), DropReason::malformed) << size;
  }
  auto flag_past = bytes;
  flag_past[flag_past.size() - 2] = 3;
  EXPECT_EQ(decode(flag_past).error(), DropReason::malformed);

  bytes = with_header(MessageKind::answered);
  encode(bytes, AnsweredMessage{"k", 1, std::nullopt});
  decoded = decode(bytes);
  ASSERT_TRUE(decoded);
  EXPECT_FALSE(std::get<AnsweredMessage>(decoded->body).answer_tokens);

  for (const auto& refused : {AnsweredMessage{"", 1, 5}, AnsweredMessage{"k", 0, 5}}) {
    bytes = with_header(MessageKind::answered);
    encode(bytes, refused);
    EXPECT_EQ(decode(bytes).error(), DropReason::malformed);
  }
}

// What an answer taught of a worker's costs, to the microsecond; absent
// figures stay absent, and an unpriced decision stays unpriced.
TEST(ClusterMessage, ALearnedCostSampleRoundTrips) {
  route::CostSample sample{812.5, 400.25, 310.5,     true,  2,      3,      12'000,  30'000,
                           4'096, 1'024,  1'210.125, 968.0, 5'000u, 4'090u, 2'178.5, 640.25};
  auto bytes = with_header(MessageKind::learned);
  encode(bytes, LearnedMessage{"m", "w1", sample});
  auto decoded = decode(bytes);
  ASSERT_TRUE(decoded);
  EXPECT_EQ(decoded->kind, MessageKind::learned);
  const auto& got = std::get<LearnedMessage>(decoded->body);
  EXPECT_EQ(got.model, "m");
  EXPECT_EQ(got.worker, "w1");
  EXPECT_EQ(got.sample, sample);
  for (std::size_t size = 0; size < bytes.size(); ++size) {
    EXPECT_EQ(decode(std::string_view(bytes).substr(0, size)).error(), DropReason::malformed) << size;
  }

  route::CostSample sparse;
  sparse.requests_ahead = 1;
  bytes = with_header(MessageKind::learned);
  encode(bytes, LearnedMessage{"m", "w1", sparse});
  decoded = decode(bytes);
  ASSERT_TRUE(decoded);
  const auto& unpriced = std::get<LearnedMessage>(decoded->body).sample;
  EXPECT_EQ(unpriced, sparse);
  EXPECT_LT(unpriced.expected_ttft_ms, 0);
  EXPECT_FALSE(unpriced.ttft_ms);
  // A flag for a figure the message does not carry is malformed.
  const auto flags_at = bytes.find("w1") + 2;
  bytes[flags_at] = static_cast<char>(0x80);
  EXPECT_EQ(decode(bytes).error(), DropReason::malformed);
}

TEST(ClusterMessage, RefusesWhatIsNotAWholeMessageOfAKnownVersion) {
  auto bytes = with_header(MessageKind::turn);
  encode(bytes, TurnMessage{"m", "key", "", 2, "w", "", policy::Reason::sticky, std::nullopt, 10, 0, 0.5, false});
  ASSERT_TRUE(decode(bytes));
  // Every truncation is refused as malformed.
  for (std::size_t size = 0; size < bytes.size(); ++size) {
    auto decoded = decode(std::string_view(bytes).substr(0, size));
    ASSERT_FALSE(decoded) << size;
    EXPECT_EQ(decoded.error(), DropReason::malformed) << size;
  }
  // Trailing bytes, another magic, an unknown kind, an unknown version.
  EXPECT_EQ(decode(bytes + "x").error(), DropReason::malformed);
  auto other = bytes;
  other[0] = 'X';
  EXPECT_EQ(decode(other).error(), DropReason::malformed);
  other = bytes;
  other[3] = 9;
  EXPECT_EQ(decode(other).error(), DropReason::malformed);
  other = bytes;
  other[2] = 2;
  EXPECT_EQ(decode(other).error(), DropReason::unknown_version);
}

// The seeds of the fuzz target are messages of this format.
TEST(ClusterMessage, TheFuzzCorpusSeedsDecode) {
  for (const char* seed : {"turn", "outcome", "assumed", "finished", "load", "learned", "answered"}) {
    std::ifstream file(std::string(KVGATE_SOURCE_DIR "/fuzz/corpus/cluster_message/") + seed, std::ios::binary);
    const std::string bytes((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
    ASSERT_FALSE(bytes.empty()) << seed;
    auto decoded = decode(bytes);
    EXPECT_TRUE(decoded) << seed;
  }
}

TEST(ClusterMessage, RefusesOutOfRangeFields) {
  // A reason past the vocabulary.
  auto bytes = with_header(MessageKind::turn);
  encode(bytes, TurnMessage{"m", "key", "", 2, "w", "", policy::Reason::sticky, std::nullopt, 10, 0, 0.5, false});
  // The tail: reason, prefill reason, input tokens (1 byte), cached (1),
  // usage (2: 501), retry.
  const auto reason_at = bytes.size() - 7;
  auto other = bytes;
  ASSERT_EQ(static_cast<std::uint8_t>(other[reason_at]), static_cast<std::uint8_t>(policy::Reason::sticky));
  other[reason_at] = static_cast<char>(200);
  EXPECT_EQ(decode(other).error(), DropReason::malformed);
  // A block count larger than the bytes that follow.
  bytes = with_header(MessageKind::assumed);
  const std::uint64_t block = 5;
  encode_blocks(bytes, "m", "w", 1, &block, 1);
  bytes.resize(bytes.size() - 8);
  EXPECT_EQ(decode(bytes).error(), DropReason::malformed);
  // A turn numbered 0 and an empty sender.
  bytes = with_header(MessageKind::turn);
  encode(bytes, TurnMessage{"m", "key", "", 0, "w", "", policy::Reason::sticky, std::nullopt, 1, 0, {}, false});
  EXPECT_EQ(decode(bytes).error(), DropReason::malformed);
  bytes.clear();
  encode_header(bytes, MessageKind::finished, 1, "", 7);
  encode(bytes, FinishedMessage{"m", "w", 1});
  EXPECT_EQ(decode(bytes).error(), DropReason::malformed);
}

}  // namespace
}  // namespace kvgate::cluster
