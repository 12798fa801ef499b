// kvgate-sim as a real process: OpenAI answers with vLLM's cached_tokens
// accounting, KV events on a real ZMQ SUB socket, metrics, errors.
#include <gtest/gtest.h>

#include <algorithm>

#include <nlohmann/json.hpp>
#include <zmq.hpp>

#include "kvgate/tokenizer/approximate.hpp"
#include "support/sim_process.hpp"

namespace kvgate::testing {
namespace {

using nlohmann::json;
using namespace std::chrono_literals;

std::uint64_t metric(int port, const std::string& name) {
  auto text = get(port, "/metrics").body;
  auto at = text.find("\n" + name + "{");
  if (at == std::string::npos) {
    return 0;
  }
  auto value = text.find("} ", at);
  return std::stoull(text.substr(value + 2));
}

TEST(Sim, SecondRequestReportsTheReusableFullBlocksAsCached) {
  Harness harness;
  SimProcess sim(harness);
  auto first = sim.chat("What is a KV cache?");
  EXPECT_EQ(first["usage"]["prompt_tokens_details"]["cached_tokens"], 0);
  auto prompt_tokens = SimProcess::prompt_tokens("What is a KV cache?").size();
  EXPECT_EQ(first["usage"]["prompt_tokens"], prompt_tokens);
  auto second = sim.chat("What is a KV cache?");
  EXPECT_EQ(second["usage"]["prompt_tokens_details"]["cached_tokens"], (prompt_tokens - 1) / 16 * 16);
  EXPECT_EQ(metric(sim.port(), "vllm:prefix_cache_hits_total"), (prompt_tokens - 1) / 16 * 16);
  EXPECT_EQ(metric(sim.port(), "vllm:generation_tokens_total"), 4u);
}

TEST(Sim, RejectsUnknownModelsAndOverlongRequestsLikeVllm) {
  Harness harness;
  SimProcess sim(harness, {"--max-model-len", "64"});
  auto unknown =
      post_json(sim.port(), "/v1/chat/completions", R"({"model":"other","messages":[{"role":"user","content":"x"}]})");
  EXPECT_EQ(unknown.status, 404);
  auto too_long =
      post_json(sim.port(), "/v1/completions", R"({"model":"sim-model","prompt":"hello","max_tokens":100})");
  EXPECT_EQ(too_long.status, 400);
  EXPECT_NE(too_long.body.find("maximum context length is 64 tokens"), std::string::npos);
  EXPECT_EQ(get(sim.port(), "/health").status, 200);
}

class EventSubscriber {
 public:
  enum class Side { connect, bind };
  // Side::bind: the subscriber binds ENDPOINT (tcp://127.0.0.1:*) and the
  // replica dials it, as llm-d's picker takes many engines' events.
  explicit EventSubscriber(const std::string& endpoint, Side side = Side::connect)
      : socket_(context_, zmq::socket_type::sub) {
    socket_.set(zmq::sockopt::subscribe, "");
    socket_.set(zmq::sockopt::rcvtimeo, 200);
    if (side == Side::bind) {
      socket_.bind(endpoint);
    } else {
      socket_.connect(endpoint);
    }
  }
  [[nodiscard]] std::string bound_endpoint() const { return socket_.get(zmq::sockopt::last_endpoint); }
  [[nodiscard]] const std::string& last_topic() const { return last_topic_; }
  // One batch: sequence number and decoded payload.
  std::optional<std::pair<std::uint64_t, json>> receive() {
    std::vector<zmq::message_t> frames;
    zmq::message_t frame;
    do {
      if (!socket_.recv(frame)) {
        return std::nullopt;
      }
      frames.emplace_back(std::move(frame));
    } while (frames.back().more());
    EXPECT_EQ(frames.size(), 3u);
    last_topic_ = frames[0].to_string();
    std::uint64_t sequence = 0;
    for (auto byte : std::string(frames[1].to_string())) {
      sequence = (sequence << 8) | static_cast<unsigned char>(byte);
    }
    auto payload = frames[2].to_string();
    return std::make_pair(sequence, json::from_msgpack(payload));
  }

 private:
  zmq::context_t context_{1};
  zmq::socket_t socket_;
  std::string last_topic_;
};

// ZMQ subscriptions take a moment to reach the publisher: send requests with
// fresh prompts (each stores new blocks) until a batch arrives, then drain.
std::optional<std::pair<std::uint64_t, json>> probe_until_subscribed(SimProcess& sim, EventSubscriber& subscriber) {
  std::optional<std::pair<std::uint64_t, json>> batch;
  for (int attempt = 0; attempt < 25 && !batch; ++attempt) {
    auto prompt = "probe " + std::to_string(attempt) + std::string(100, static_cast<char>('a' + attempt % 26));
    post_json(sim.port(), "/v1/completions",
              json{{"model", "sim-model"}, {"prompt", prompt}, {"max_tokens", 1}}.dump());
    batch = subscriber.receive();
  }
  while (subscriber.receive()) {
  }
  return batch;
}

TEST(Sim, PublishesTheStoredBlocksWithTheirTokenIds) {
  Harness harness;
  SimProcess sim(harness, {"--kv-events-endpoint", "tcp://127.0.0.1:*", "--kv-events-format", "map"});
  EventSubscriber subscriber(sim.events_endpoint());
  auto batch = probe_until_subscribed(sim, subscriber);
  ASSERT_TRUE(batch) << "no KV events received";
  sim.chat("Explain paged attention in depth.");
  auto stored = subscriber.receive();
  ASSERT_TRUE(stored);
  const auto& events = stored->second[1];
  ASSERT_GE(events.size(), 1u);
  EXPECT_EQ(events[0]["type"], "BlockStored");
  EXPECT_EQ(events[0]["block_size"], 16);
  EXPECT_EQ(events[0]["medium"], "GPU");
  auto expected_tokens = SimProcess::prompt_tokens("Explain paged attention in depth.");
  auto full = expected_tokens.size() / 16 * 16;
  // Blocks already cached are not stored again: this batch carries the
  // blocks after the longest cached prefix, with their tokens.
  auto tokens = events[0]["token_ids"].get<std::vector<kvgate::TokenId>>();
  ASSERT_FALSE(tokens.empty());
  ASSERT_LE(tokens.size(), full);
  EXPECT_TRUE(std::equal(tokens.begin(), tokens.end(), expected_tokens.begin() + (full - tokens.size())));
  EXPECT_EQ(events[0]["block_hashes"].size() * 16, tokens.size());
  EXPECT_GT(stored->first, batch->first);
}

// vLLM's render endpoints give the token ids the replica computes for a
// request, running nothing; with a topic and a subscriber to dial, every
// batch also reaches a subscriber that binds, under that topic (how llm-d's
// picker tokenises and hears many engines on one socket).
TEST(Sim, RendersPromptsAndDialsASubscriberThatBindsWithItsTopic) {
  Harness harness;
  EventSubscriber picker("tcp://127.0.0.1:*", EventSubscriber::Side::bind);
  SimProcess sim(harness, {"--kv-events-endpoint", "tcp://127.0.0.1:*", "--kv-events-topic",
                           "kv@127.0.0.1:8000@sim-model", "--kv-events-connect", picker.bound_endpoint()});
  const json chat = {{"model", "sim-model"},
                     {"messages",
                      {{{"role", "system"}, {"content", SimProcess::kSystem}},
                       {{"role", "user"}, {"content", "Render me, do not run me."}}}}};
  auto rendered = post_json(sim.port(), "/v1/chat/completions/render", chat.dump());
  ASSERT_EQ(rendered.status, 200) << rendered.body;
  EXPECT_EQ(json::parse(rendered.body)["token_ids"].get<std::vector<kvgate::TokenId>>(),
            SimProcess::prompt_tokens("Render me, do not run me."));
  auto text = post_json(sim.port(), "/v1/completions/render", R"({"model":"sim-model","prompt":"one two three"})");
  ASSERT_EQ(text.status, 200) << text.body;
  auto entries = json::parse(text.body);
  ASSERT_TRUE(entries.is_array());
  ASSERT_EQ(entries.size(), 1u);
  EXPECT_FALSE(entries[0]["token_ids"].empty());
  // Nothing ran: no prompt tokens counted, nothing cached.
  EXPECT_EQ(metric(sim.port(), "vllm:prompt_tokens_total"), 0u);
  // The render endpoints refuse what the completion would refuse.
  auto unknown = post_json(sim.port(), "/v1/chat/completions/render",
                           R"({"model":"other","messages":[{"role":"user","content":"x"}]})");
  EXPECT_EQ(unknown.status, 404);
  auto empty = post_json(sim.port(), "/v1/chat/completions/render", R"({"model":"sim-model","messages":[]})");
  EXPECT_EQ(empty.status, 400);

  auto batch = probe_until_subscribed(sim, picker);
  ASSERT_TRUE(batch) << "the replica never reached the subscriber it dials";
  EXPECT_EQ(picker.last_topic(), "kv@127.0.0.1:8000@sim-model");
  // Its own bound socket still serves a subscriber that connects (fresh
  // prompts: the probes' blocks are cached and would not be stored again).
  EventSubscriber direct(sim.events_endpoint());
  std::optional<std::pair<std::uint64_t, json>> heard;
  for (int attempt = 0; attempt < 25 && !heard; ++attempt) {
    sim.fresh_completion(attempt);
    heard = direct.receive();
  }
  ASSERT_TRUE(heard) << "no batch on the replica's own socket";
  EXPECT_EQ(direct.last_topic(), "kv@127.0.0.1:8000@sim-model");
  EXPECT_GT(metric(sim.port(), "vllm:prompt_tokens_total"), 0u);  // the probes ran, the renders did not
}

TEST(Sim, EvictionAndResetArePublished) {
  Harness harness;
  // 4 blocks of 16 tokens: every new prompt evicts the previous one's blocks.
  SimProcess sim(harness, {"--kv-events-endpoint", "tcp://127.0.0.1:*", "--kv-events-format", "array",
                           "--num-gpu-blocks", "4", "--max-model-len", "64"});
  EventSubscriber subscriber(sim.events_endpoint());
  ASSERT_TRUE(probe_until_subscribed(sim, subscriber));
  bool removed = false;
  for (int round = 0; round < 4 && !removed; ++round) {
    post_json(sim.port(), "/v1/completions",
              json{{"model", "sim-model"}, {"prompt", std::string(100, 'A' + round)}, {"max_tokens", 1}}.dump());
    while (auto next = subscriber.receive()) {
      for (const auto& event : next->second[1]) {
        removed = removed || event[0] == "BlockRemoved";
      }
    }
  }
  EXPECT_TRUE(removed);
  EXPECT_EQ(post_json(sim.port(), "/reset_prefix_cache", "").status, 200);
  auto cleared = subscriber.receive();
  ASSERT_TRUE(cleared);
  EXPECT_EQ(cleared->second[1][0], json::array({"AllBlocksCleared"}));
}

TEST(Sim, ClientDisconnectAbortsTheRequest) {
  Harness harness;
  SimProcess sim(harness, {"--time-scale", "1"});
  {
    EventStream stream(sim.port(), "/v1/completions",
                       R"({"model":"sim-model","prompt":"long story","max_tokens":30000,"stream":true})");
    ASSERT_TRUE(stream.next_event());
    EXPECT_EQ(metric(sim.port(), "vllm:num_requests_running"), 1u);
    stream.close();
  }
  bool stopped = false;
  auto deadline = std::chrono::steady_clock::now() + 10s;
  while (!stopped && std::chrono::steady_clock::now() < deadline) {
    stopped = metric(sim.port(), "vllm:num_requests_running") == 0;
  }
  EXPECT_TRUE(stopped);
}

std::string big_endian(std::uint64_t value) {
  std::string bytes(8, '\0');
  for (int byte = 0; byte < 8; ++byte) {
    bytes[static_cast<std::size_t>(byte)] = static_cast<char>((value >> ((7 - byte) * 8)) & 0xff);
  }
  return bytes;
}

TEST(Sim, ReplayReturnsTheBatchesASubscriberMissed) {
  Harness harness;
  SimProcess sim(harness, {"--kv-events-endpoint", "tcp://127.0.0.1:*", "--kv-events-replay-endpoint",
                           "tcp://127.0.0.1:*", "--kv-events-format", "map"});
  EventSubscriber subscriber(sim.events_endpoint());
  auto last = probe_until_subscribed(sim, subscriber);
  ASSERT_TRUE(last);
  std::uint64_t last_seen = last->first;
  while (auto more = subscriber.receive()) {
    last_seen = more->first;
  }
  sim.fault({{"mode", "drop_batches"}, {"count", 2}});
  sim.fresh_completion(1);
  sim.fresh_completion(2);
  sim.fresh_completion(3);
  auto after_gap = subscriber.receive();
  ASSERT_TRUE(after_gap);
  ASSERT_GT(after_gap->first, last_seen + 1) << "no gap: the dropped batches arrived";

  zmq::context_t context(1);
  zmq::socket_t dealer(context, zmq::socket_type::dealer);
  dealer.set(zmq::sockopt::rcvtimeo, 5000);
  dealer.connect(sim.replay_endpoint());
  auto start = big_endian(last_seen + 1);
  dealer.send(zmq::const_buffer("", 0), zmq::send_flags::sndmore);
  dealer.send(zmq::buffer(start), zmq::send_flags::none);
  std::vector<std::uint64_t> replayed;
  for (;;) {
    std::vector<zmq::message_t> frames;
    zmq::message_t frame;
    do {
      ASSERT_TRUE(dealer.recv(frame)) << "replay answer timed out";
      frames.emplace_back(std::move(frame));
    } while (frames.back().more());
    ASSERT_EQ(frames.size(), 4u);  // newer vLLM's layout: "", topic, seq, payload
    std::uint64_t sequence = 0;
    for (auto byte : frames[2].to_string_view()) {
      sequence = (sequence << 8) | static_cast<unsigned char>(byte);
    }
    if (sequence == UINT64_MAX) {
      EXPECT_EQ(frames[3].size(), 0u);
      break;
    }
    EXPECT_EQ(json::from_msgpack(frames[3].to_string())[1][0]["type"], "BlockStored");
    replayed.push_back(sequence);
  }
  ASSERT_GE(replayed.size(), 3u);
  EXPECT_EQ(replayed[0], last_seen + 1);
  EXPECT_EQ(replayed[1], last_seen + 2);
  EXPECT_EQ(replayed[2], after_gap->first);
}

TEST(Sim, FaultsFailHangAndRecover) {
  Harness harness;
  SimProcess sim(harness);
  sim.fault({{"mode", "status"}, {"status", 503}});
  EXPECT_EQ(get(sim.port(), "/health").status, 503);
  EXPECT_EQ(post_json(sim.port(), "/v1/completions", R"({"model":"sim-model","prompt":"x"})").status, 503);
  sim.fault({{"mode", "hang"}});
  auto body = std::string(R"({"model":"sim-model","prompt":"x"})");
  auto answer = raw_exchange(
      sim.port(),
      "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body,
      300ms);
  EXPECT_EQ(answer, "");
  sim.fault({{"mode", "none"}});
  EXPECT_EQ(get(sim.port(), "/health").status, 200);
  EXPECT_EQ(post_json(sim.port(), "/sim/fault", R"({"mode":"explode"})").status, 400);
}

TEST(Sim, DropAfterResetsTheStreamMidway) {
  Harness harness;
  SimProcess sim(harness);
  sim.fault({{"mode", "drop_after"}, {"tokens", 2}});
  EventStream stream(sim.port(), "/v1/completions",
                     R"({"model":"sim-model","prompt":"tell me","max_tokens":10,"stream":true})");
  std::vector<std::string> events;
  EXPECT_THROW(
      {
        while (auto event = stream.next_event()) {
          events.push_back(*event);
        }
      },
      std::runtime_error);
  EXPECT_EQ(events.size(), 3u);  // the role event and two tokens
}

TEST(Sim, EvictAllAndRestartForgetTheCache) {
  Harness harness;
  SimProcess sim(harness, {"--kv-events-endpoint", "tcp://127.0.0.1:*"});
  EventSubscriber subscriber(sim.events_endpoint());
  ASSERT_TRUE(probe_until_subscribed(sim, subscriber));
  sim.fresh_completion(7);
  EXPECT_GT(sim.fresh_completion(7)["usage"]["prompt_tokens_details"]["cached_tokens"], 0);
  while (subscriber.receive()) {
  }
  sim.fault({{"mode", "evict_all"}});
  auto removed = subscriber.receive();
  ASSERT_TRUE(removed);
  EXPECT_EQ(removed->second[1][0]["type"], "BlockRemoved");
  EXPECT_EQ(sim.fresh_completion(7)["usage"]["prompt_tokens_details"]["cached_tokens"], 0);
  while (subscriber.receive()) {
  }

  sim.fault({{"mode", "restart"}});
  EXPECT_EQ(sim.fresh_completion(7)["usage"]["prompt_tokens_details"]["cached_tokens"], 0);
  std::optional<std::pair<std::uint64_t, json>> first_after_restart;
  while (auto batch = subscriber.receive()) {
    if (!first_after_restart) {
      first_after_restart = batch;
    }
  }
  ASSERT_TRUE(first_after_restart);
  EXPECT_EQ(first_after_restart->first, 0u);  // sequence numbers start again
}

}  // namespace
}  // namespace kvgate::testing
