// Several kvgate replicas as one (cluster:), with real processes: three
// gateways in front of the same replicas (kvgate-test-upstream: no KV
// events, so only the shared routing state keeps sessions together) and a
// real redis-server. A session's turns alternating across the gateways
// stay on their worker with one history; a replica started late or
// restarted catches up from the stream; the engine killed, every replica
// keeps routing on its own, says so once and rejoins; hostile messages on
// the stream are counted and ignored.
#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <memory>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "kvgate/cluster/message.hpp"
#include "support/harness.hpp"
#include "support/redis_process.hpp"

namespace kvgate::testing {
namespace {

using nlohmann::json;
using namespace std::chrono_literals;

// Polls an admin endpoint of a remote process until `done` holds (a
// condition wait with a generous deadline, not a timing assertion).
void wait_for(const std::string& what, const std::function<bool()>& done, std::chrono::seconds limit = 20s,
              const std::function<std::string()>& state = {}) {
  const auto started = std::chrono::steady_clock::now();
  const auto deadline = started + limit;
  while (!done()) {
    if (std::chrono::steady_clock::now() > deadline) {
      FAIL()
          << "never: " << what << " (waited "
          << std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - started).count()
          << " ms)" << (state ? "; last: " + state() : std::string());
      return;
    }
    std::this_thread::sleep_for(20ms);
  }
}

double metric(const std::string& text, const std::string& series) {
  const auto at = text.find("\n" + series + " ");
  return at == std::string::npos ? -1 : std::stod(text.substr(at + series.size() + 2));
}

class Cluster {
 public:
  Cluster() : redis_(std::make_unique<RedisProcess>(base_)) {
    for (const char* id : {"u0", "u1", "u2"}) {
      base_.start_upstream(id);
    }
  }

  // Starts replica `index` (gw-<index>), or a new process for it.
  Harness& start(std::size_t index) {
    if (replicas_.size() <= index) {
      replicas_.resize(index + 1);
    }
    replicas_[index] = std::make_unique<Harness>();
    replicas_[index]->start_gateway(
        "routing: {policy: cache_aware}\nhealth_check: {interval: 200ms}\n"
        "cluster: {url: \"" +
            redis_->url() + "\", replica_id: gw-" + std::to_string(index) +
            ", load_interval: 20ms, peer_timeout: 1s}\n",
        base_.models_for_upstreams());
    return *replicas_[index];
  }
  Harness& replica(std::size_t index) { return *replicas_.at(index); }

  json cluster_of(std::size_t index) { return json::parse(get(replica(index).admin_port(), "/debug/cluster").body); }

  std::size_t live_peers(std::size_t index) {
    std::size_t live = 0;
    const auto status = cluster_of(index);  // the range below views it
    for (const auto& peer : status["peers"]) {
      live += peer["live"].get<bool>() ? 1 : 0;
    }
    return live;
  }

  void wait_formed(std::size_t replicas) {
    for (std::size_t index = 0; index < replicas; ++index) {
      wait_for(
          "gw-" + std::to_string(index) + " hears its peers",
          [&] { return cluster_of(index)["connected"] == true && live_peers(index) == replicas - 1; }, 20s,
          [&] { return cluster_of(index).dump(); });
    }
  }

  json session(std::size_t index, const std::string& key) {
    auto response = get(replica(index).admin_port(), "/debug/sessions/" + key);
    return response.status == 200 ? json::parse(response.body) : json();
  }
  std::size_t turns(std::size_t index, const std::string& key) {
    auto detail = session(index, key);
    return detail.is_null() ? 0 : detail["turns"].size();
  }
  // The replica has applied `count` turns of the session, the last one
  // answered (its outcome, and so the end of its request, applied too).
  bool has_answered(std::size_t index, const std::string& key, std::size_t count) {
    auto detail = session(index, key);
    const auto held = detail.is_null() ? 0 : detail["turns"].size();
    return held == count && (count == 0 || detail["turns"].back()["status"] == 200);
  }

  RedisProcess& redis() { return *redis_; }
  void restart_redis() {
    const auto port = redis_->port();
    redis_.reset();
    redis_ = std::make_unique<RedisProcess>(base_, port);
  }

 private:
  Harness base_;  // the upstreams
  std::unique_ptr<RedisProcess> redis_;
  std::vector<std::unique_ptr<Harness>> replicas_;
};

// A conversation of its own: a long system prompt no other session shares.
struct Conversation {
  std::string key;
  json messages;
  std::string last_receipt;  // x-kvgate-route of the last turn, for failure messages
  explicit Conversation(std::string session) : key(std::move(session)) {
    std::string system = "You are the assistant of conversation " + key + ".";
    for (int line = 0; line < 12; ++line) {
      system += " Rule " + std::to_string(line) + " of " + key + ": answer briefly and cite the manual.";
    }
    messages = json::array({{{"role", "system"}, {"content", system}}});
  }
  // Sends the next turn through `port`; returns the route receipt's worker
  // and reason.
  std::pair<std::string, std::string> send(int port, int turn) {
    messages.push_back({{"role", "user"}, {"content", "question " + std::to_string(turn) + " in " + key}});
    json body{{"model", "test-model"}, {"max_tokens", 4}, {"messages", messages}};
    auto response =
        post_json(port, "/v1/chat/completions", body.dump(), {{"x-session-id", key}, {"x-kvgate-explain", "1"}});
    EXPECT_EQ(response.status, 200) << response.body;
    messages.push_back({{"role", "assistant"}, {"content", "answer " + std::to_string(turn)}});
    static const std::regex kReason("reason=([a-z_]+)");
    std::smatch match;
    const auto receipt = response.header("x-kvgate-route");
    std::string reason = std::regex_search(receipt, match, kReason) ? match[1].str() : "";
    last_receipt = receipt;
    return {response.header("x-kvgate-worker"), reason};
  }
};

TEST(Cluster, ASessionsTurnsAlternatingAcrossReplicasStayOnItsWorkerWithOneHistory) {
  Cluster cluster;
  for (std::size_t index = 0; index < 3; ++index) {
    cluster.start(index);
  }
  cluster.wait_formed(3);
  constexpr int kTurns = 4;
  std::vector<Conversation> conversations;
  for (int session = 0; session < 6; ++session) {
    conversations.emplace_back("conversation-" + std::to_string(session));
  }
  // A key longer than a message's text field (kMaxText): every replica
  // names it by the session table's hash of it.
  conversations.emplace_back("long-" + std::string(5'000, 'k'));
  std::map<std::string, std::vector<std::string>> workers;
  const Conversation* previous = nullptr;  // the request sent last, any conversation's
  std::size_t previous_turns = 0;
  for (int turn = 0; turn < kTurns; ++turn) {
    for (std::size_t session = 0; session < conversations.size(); ++session) {
      auto& conversation = conversations[session];
      const auto replica = (session + static_cast<std::size_t>(turn)) % 3;
      // The replica has applied the previous turn and its answer before
      // this one arrives (a client's next turn follows the answer; the
      // stream is faster). And the request sent just before, whichever
      // conversation's, has ended there: a client has its answer a moment
      // before the gateway that relayed it counts the request ended, and
      // until then every replica rightly prices it as in flight (its end
      // reaches the peers no later than its outcome).
      wait_for(conversation.key + " reaches gw-" + std::to_string(replica),
               [&] { return cluster.has_answered(replica, conversation.key, static_cast<std::size_t>(turn)); });
      if (previous != nullptr) {
        wait_for(previous->key + " ended on gw-" + std::to_string(replica),
                 [&] { return cluster.has_answered(replica, previous->key, previous_turns); });
      }
      auto [worker, reason] = conversation.send(cluster.replica(replica).api_port(), turn);
      previous = &conversation;
      previous_turns = static_cast<std::size_t>(turn) + 1;
      workers[conversation.key].push_back(worker);
      EXPECT_EQ(reason, turn == 0 ? "new_session" : "sticky")
          << conversation.key << " turn " << turn << ": " << conversation.last_receipt;
    }
  }
  for (const auto& conversation : conversations) {
    const auto& seen = workers[conversation.key];
    EXPECT_EQ(std::count(seen.begin(), seen.end(), seen.front()), kTurns) << conversation.key;
    // Every replica holds the whole history, outcomes included.
    for (std::size_t replica = 0; replica < 3; ++replica) {
      wait_for(conversation.key + " completed on gw-" + std::to_string(replica), [&] {
        auto detail = cluster.session(replica, conversation.key);
        return !detail.is_null() && detail["turns"].size() == kTurns && detail["turns"].back()["status"] == 200;
      });
      auto detail = cluster.session(replica, conversation.key);
      for (std::size_t turn = 0; turn < kTurns; ++turn) {
        EXPECT_EQ(detail["turns"][turn]["turn"], turn + 1);
        EXPECT_EQ(detail["turns"][turn]["worker"], seen.front());
      }
      // And the last answer's length (published before its outcome), which
      // a slot engine's next turn expects its slot to hold, whichever
      // replica routes it.
      EXPECT_TRUE(detail["last_answer_tokens"].is_number_unsigned()) << detail.dump();
      EXPECT_EQ(detail["last_answer_tokens"], cluster.session(0, conversation.key)["last_answer_tokens"]);
    }
  }
  const auto metrics = get(cluster.replica(1).admin_port(), "/metrics").body;
  EXPECT_GT(metric(metrics, "kvgate_cluster_messages_applied_total{kind=\"turn\"}"), 0);
  EXPECT_GT(metric(metrics, "kvgate_cluster_messages_applied_total{kind=\"assumed\"}"), 0);
  EXPECT_GT(metric(metrics, "kvgate_cluster_messages_applied_total{kind=\"answered\"}"), 0);
  EXPECT_EQ(metric(metrics, "kvgate_cluster_peers"), 2);
  EXPECT_EQ(metric(metrics, "kvgate_cluster_engine_connected"), 1);
  const auto page = get(cluster.replica(1).admin_port(), "/").body;
  EXPECT_NE(page.find("<h2>Cluster</h2>"), std::string::npos);
  EXPECT_NE(page.find("gw-2"), std::string::npos);
}

// A worker's costs (TTFT calibration, prefill fit) are learned by every
// replica from every replica's answers: a replica that served nothing
// knows what its peer's answers taught.
TEST(Cluster, EveryReplicaLearnsAWorkersCostsFromEveryReplicasAnswers) {
  Cluster cluster;
  cluster.start(0);
  cluster.start(1);
  cluster.wait_formed(2);
  constexpr int kRequests = 6;
  for (int request = 0; request < kRequests; ++request) {
    const auto body = json{{"model", "test-model"},
                           {"max_tokens", 4},
                           {"stream", true},
                           {"stream_options", {{"include_usage", true}}},
                           {"messages", json::array({{{"role", "user"},
                                                      {"content", "learned costs, question " + std::to_string(request) +
                                                                      std::string(200, 'a' + request % 26)}}})}}
                          .dump();
    EventStream stream(cluster.replica(0).api_port(), "/v1/chat/completions", body);
    ASSERT_EQ(stream.status(), 200);
    stream.rest();
  }
  auto calibrated = [&](std::size_t index) {
    std::uint64_t samples = 0;
    const auto state = json::parse(get(cluster.replica(index).admin_port(), "/debug/workers").body);
    for (const auto& worker : state["workers"]) {
      const auto& calibration = worker["ttft_calibration"];  // null before a worker's first sample
      samples += calibration.is_object() ? calibration["samples"].get<std::uint64_t>() : 0;
    }
    return samples;
  };
  wait_for(
      "gw-0 calibrated on its answers", [&] { return calibrated(0) == kRequests; }, 20s,
      [&] { return std::to_string(calibrated(0)); });
  wait_for(
      "gw-1 calibrated on gw-0's answers", [&] { return calibrated(1) == kRequests; }, 20s,
      [&] { return std::to_string(calibrated(1)); });
  const auto metrics = get(cluster.replica(1).admin_port(), "/metrics").body;
  EXPECT_EQ(metric(metrics, "kvgate_cluster_messages_applied_total{kind=\"learned\"}"), kRequests);
}

TEST(Cluster, AReplicaStartedLateOrRestartedCatchesUpFromTheStream) {
  Cluster cluster;
  cluster.start(0);
  cluster.start(1);
  cluster.wait_formed(2);
  Conversation conversation("catch-up");
  const auto first = conversation.send(cluster.replica(0).api_port(), 0);
  wait_for("turn 1 on gw-1", [&] { return cluster.has_answered(1, conversation.key, 1); });
  const auto second = conversation.send(cluster.replica(1).api_port(), 1);
  EXPECT_EQ(second.first, first.first);
  // A replica that was not there: it reads the stream from catch_up back.
  cluster.start(2);
  wait_for("gw-2 caught up", [&] { return cluster.has_answered(2, conversation.key, 2); });
  const auto third = conversation.send(cluster.replica(2).api_port(), 2);
  EXPECT_EQ(third, std::make_pair(first.first, std::string("sticky")));
  // gw-0 killed without a goodbye and started again as gw-0: what its
  // former process published is caught up like a peer's.
  cluster.replica(0).gateway().send_signal(SIGKILL);
  cluster.replica(0).gateway().wait_exit(5s);
  cluster.start(0);
  wait_for("gw-0 caught up", [&] { return cluster.has_answered(0, conversation.key, 3); });
  const auto fourth = conversation.send(cluster.replica(0).api_port(), 3);
  EXPECT_EQ(fourth, std::make_pair(first.first, std::string("sticky")));
  // The new gw-0 is the same peer to the others (one id), and live.
  wait_for("gw-1 hears the restarted gw-0", [&] { return cluster.live_peers(1) == 2; });
}

TEST(Cluster, WithTheEngineGoneEveryReplicaRoutesOnItsOwnSaysSoOnceAndRejoinsLosingNothing) {
  Cluster cluster;
  for (std::size_t index = 0; index < 3; ++index) {
    cluster.start(index);
  }
  cluster.wait_formed(3);
  cluster.redis().kill();
  for (std::size_t index = 0; index < 3; ++index) {
    wait_for("gw-" + std::to_string(index) + " knows it is cut off",
             [&] { return cluster.cluster_of(index)["connected"] == false; });
  }
  // Requests keep being answered by every replica, each on its own state;
  // what they would tell their peers waits in their outboxes.
  std::vector<std::pair<std::string, std::size_t>> alone;
  for (int round = 0; round < 3; ++round) {
    for (std::size_t index = 0; index < 3; ++index) {
      Conversation conversation("alone-" + std::to_string(round) + "-" + std::to_string(index));
      const auto [worker, reason] = conversation.send(cluster.replica(index).api_port(), 0);
      EXPECT_FALSE(worker.empty());
      EXPECT_EQ(reason, "new_session");
      alone.emplace_back(conversation.key, index);
    }
  }
  for (std::size_t index = 0; index < 3; ++index) {
    EXPECT_GT(cluster.cluster_of(index)["queued"].get<int>(), 0) << "gw-" << index;
  }
  cluster.restart_redis();
  // Back: every session begun during the outage reaches every replica.
  for (const auto& session : alone) {
    // Named copies: a lambda may not capture a structured binding (C++20).
    const std::string key = session.first;
    const std::size_t origin = session.second;
    for (std::size_t index = 0; index < 3; ++index) {
      wait_for(key + " from gw-" + std::to_string(origin) + " reaches gw-" + std::to_string(index),
               [&] { return cluster.has_answered(index, key, 1); });
    }
  }
  cluster.wait_formed(3);
  for (std::size_t index = 0; index < 3; ++index) {
    const auto log = cluster.replica(index).gateway().stderr_text();
    std::size_t said = 0;
    for (auto at = log.find("unreachable"); at != std::string::npos; at = log.find("unreachable", at + 1)) {
      ++said;
    }
    EXPECT_EQ(said, 1u) << "gw-" << index << " said it was cut off " << said << " times:\n" << log;
    EXPECT_NE(log.find("reachable again"), std::string::npos);
    const auto metrics = get(cluster.replica(index).admin_port(), "/metrics").body;
    EXPECT_EQ(metric(metrics, "kvgate_cluster_messages_dropped_total{reason=\"queue_full\"}"), 0);
  }
  // Shared again: a new session alternating across the replicas stays.
  Conversation together("together");
  const auto first = together.send(cluster.replica(0).api_port(), 0);
  for (int turn = 1; turn < 3; ++turn) {
    const auto replica = static_cast<std::size_t>(turn);
    wait_for("together reaches gw-" + std::to_string(replica),
             [&] { return cluster.has_answered(replica, together.key, static_cast<std::size_t>(turn)); });
    EXPECT_EQ(together.send(cluster.replica(replica).api_port(), turn),
              std::make_pair(first.first, std::string("sticky")));
  }
}

TEST(Cluster, AHostilePeersMessagesAreCountedAndIgnored) {
  Cluster cluster;
  cluster.start(0);
  cluster.wait_formed(1);
  const auto port = cluster.redis().port();
  auto add = [&](const std::vector<std::string>& fields) {
    std::vector<std::string> command{"XADD", "kvgate", "*"};
    command.insert(command.end(), fields.begin(), fields.end());
    EXPECT_EQ(redis_command(port, command).substr(0, 1), "$");  // the new entry's id
  };
  add({"m", "not a message"});
  add({"x", "no m field"});
  std::string newer;
  cluster::encode_header(newer, cluster::MessageKind::finished, 1, "intruder", 7);
  newer[2] = 9;  // a version this replica does not read
  add({"m", newer});
  std::string ghost;
  cluster::encode_header(ghost, cluster::MessageKind::turn, 1, "intruder", 7);
  cluster::encode(ghost, cluster::TurnMessage{"test-model", "ghost-session", "", 1, "ghost-worker", "",
                                              policy::Reason::new_session, std::nullopt, 10, 0, std::nullopt, false});
  add({"m", ghost});
  std::string elsewhere;
  cluster::encode_header(elsewhere, cluster::MessageKind::finished, 1, "intruder", 7);
  cluster::encode(elsewhere, cluster::FinishedMessage{"no-such-model", "u0", 1});
  add({"m", elsewhere});
  const auto admin = cluster.replica(0).admin_port();
  wait_for("every hostile message counted", [&] {
    const auto metrics = get(admin, "/metrics").body;
    return metric(metrics, "kvgate_cluster_messages_dropped_total{reason=\"malformed\"}") == 2 &&
           metric(metrics, "kvgate_cluster_messages_dropped_total{reason=\"unknown_version\"}") == 1 &&
           metric(metrics, "kvgate_cluster_messages_dropped_total{reason=\"unknown_worker\"}") == 1 &&
           metric(metrics, "kvgate_cluster_messages_dropped_total{reason=\"unknown_model\"}") == 1;
  });
  EXPECT_EQ(cluster.turns(0, "ghost-session"), 0u);
  // The replica goes on routing and publishing.
  Conversation after("after-the-noise");
  EXPECT_FALSE(after.send(cluster.replica(0).api_port(), 0).first.empty());
  EXPECT_EQ(cluster.cluster_of(0)["connected"], true);
}

}  // namespace
}  // namespace kvgate::testing
