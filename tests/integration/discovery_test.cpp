// Workers discovered at run time (models[].workers_from), end to end:
// kvgate in front of real kvgate-sim replicas that come and go while a
// client keeps sending requests. The file source is a real file replaced
// the way a ConfigMap update replaces it (write, then rename); the DNS
// source asks a real DNS server over UDP on 127.0.0.1 (a small one in this
// test), whose answers point at sims on loopback addresses 127.0.0.2-4.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <random>
#include <regex>
#include <set>
#include <thread>

#include "support/admin.hpp"
#include "support/harness.hpp"
#include "support/sim_process.hpp"

namespace kvgate::testing {
namespace {

using nlohmann::json;
using namespace std::chrono_literals;

// Sends requests without pause from its own thread until destroyed, and
// counts those that did not end in 200.
class SteadyTraffic {
 public:
  explicit SteadyTraffic(int port) : thread_([this, port] { run(port); }) {}
  ~SteadyTraffic() {
    stop_ = true;
    thread_.join();
  }
  [[nodiscard]] int sent() const { return sent_; }
  [[nodiscard]] int failed() const { return failed_; }
  [[nodiscard]] std::string failures() {
    std::lock_guard lock(mutex_);
    return failures_;
  }
  [[nodiscard]] std::set<std::string> workers() {
    std::lock_guard lock(mutex_);
    return workers_;
  }
  // Starts the set of answering workers again, counting only requests sent
  // from now on: one already in flight may still be answered by a worker
  // that has since been removed.
  void forget_workers() {
    std::lock_guard lock(mutex_);
    workers_.clear();
    ++epoch_;
  }

 private:
  void run(int port) {
    while (!stop_) {
      const auto body = json{
          {"model", "sim-model"},
          {"prompt", "request " + std::to_string(sent_.load()) + std::string(200, 'x')},
          {"max_tokens", 2}}.dump();
      ++sent_;
      int epoch = 0;
      {
        std::lock_guard lock(mutex_);
        epoch = epoch_;
      }
      try {
        auto response = post_json(port, "/v1/completions", body);
        std::lock_guard lock(mutex_);
        if (response.status != 200) {
          ++failed_;
          failures_ += std::to_string(response.status) + " " + response.body + "\n";
        } else if (epoch == epoch_) {
          workers_.insert(response.header("x-kvgate-worker"));
        }
      } catch (const std::exception& error) {
        std::lock_guard lock(mutex_);
        ++failed_;
        failures_ += std::string(error.what()) + "\n";
      }
    }
  }
  std::atomic<bool> stop_{false};
  std::atomic<int> sent_{0};
  std::atomic<int> failed_{0};
  std::mutex mutex_;
  std::string failures_;
  std::set<std::string> workers_;
  int epoch_ = 0;  // forget_workers calls; under mutex_
  std::thread thread_;
};

std::set<std::string> worker_ids(Harness& harness) {
  std::set<std::string> ids;
  const auto workers = json::parse(get(harness.admin_port(), "/debug/workers").body);
  for (const auto& worker : workers["workers"]) {
    ids.insert(worker["id"].get<std::string>());
  }
  return ids;
}

// A ConfigMap update: the new content appears whole, by rename.
void replace_file(const std::string& path, const std::string& text) {
  const auto staged = path + ".new";
  std::ofstream(staged) << text;
  std::filesystem::rename(staged, path);
}

std::string worker_line(const std::string& id, const SimProcess& sim) {
  return "- {id: " + id + ", url: \"" + sim.url() + "\", kv_events: \"" + sim.events_endpoint() + "\"}\n";
}

TEST(Discovery, AWatchedFileAddsAndRemovesWorkersWhileTrafficRunsWithoutAFailedRequest) {
  Harness harness;
  const std::vector<std::string> events{"--kv-events-endpoint", "tcp://127.0.0.1:*"};
  SimProcess a(harness, events, "a");
  SimProcess b(harness, events, "b");
  SimProcess c(harness, events, "c");
  const auto file = harness.folder() + "/workers.yaml";
  replace_file(file, worker_line("a", a) + worker_line("b", b));
  harness.start_gateway(
      "routing: {policy: round_robin}\nhealth_check: {interval: 200ms}\n",
      "models:\n  - name: \"sim-model\"\n    block_size: 16\n    workers_from: {file: \"" + file + "\"}\n");
  EXPECT_EQ(worker_ids(harness), (std::set<std::string>{"a", "b"})) << "discovered before the first request";
  SteadyTraffic traffic(harness.api_port());
  ASSERT_TRUE(eventually([&] { return traffic.sent() > 20; }));
  const auto b_before = worker_state(harness, "b");

  replace_file(file, worker_line("a", a) + worker_line("b", b) + worker_line("c", c));
  ASSERT_TRUE(eventually([&] { return worker_ids(harness).contains("c"); }));
  ASSERT_TRUE(eventually([&] { return traffic.workers().contains("c"); })) << "the new worker takes traffic";

  replace_file(file, worker_line("b", b) + worker_line("c", c));
  ASSERT_TRUE(eventually([&] { return !worker_ids(harness).contains("a"); }));
  traffic.forget_workers();
  ASSERT_TRUE(eventually([&] { return traffic.workers().size() >= 2; }));
  EXPECT_FALSE(traffic.workers().contains("a")) << "a removed worker takes no new request";

  // b stayed through both changes: the same state, not a new one.
  const auto b_after = worker_state(harness, "b");
  EXPECT_GE(b_after["kv_events"]["batches"].get<int>(), b_before["kv_events"]["batches"].get<int>());
  EXPECT_GT(b_before["index"]["blocks"].get<int>(), 0);
  EXPECT_GE(b_after["index"]["blocks"].get<int>(), b_before["index"]["blocks"].get<int>());
  EXPECT_EQ(b_after["healthy"], true);

  // A broken file keeps the last good list.
  replace_file(file, "- {id: b, url: \"not a url\"}\n");
  ASSERT_TRUE(eventually([&] {
    return get(harness.admin_port(), "/metrics")
               .body.find("kvgate_discovery_errors_total{model=\"sim-model\",source=\"file\"} 1") != std::string::npos;
  }));
  EXPECT_EQ(worker_ids(harness), (std::set<std::string>{"b", "c"}));
  const auto sent = traffic.sent();
  ASSERT_TRUE(eventually([&] { return traffic.sent() > sent + 10; }));
  EXPECT_EQ(traffic.failed(), 0) << traffic.failures();
  EXPECT_NE(get(harness.admin_port(), "/metrics")
                .body.find("kvgate_discovered_workers{model=\"sim-model\",source=\"file\"} 2"),
            std::string::npos);
}

// Every worker label value in an exposition.
std::set<std::string> worker_labels(const std::string& exposition) {
  std::set<std::string> labels;
  static const std::regex kWorker("worker=\"([^\"]*)\"");
  for (std::sregex_iterator it(exposition.begin(), exposition.end(), kWorker), end; it != end; ++it) {
    labels.insert((*it)[1]);
  }
  return labels;
}

// A worker's series leave /metrics with the worker: one replaced a hundred
// times (a new id each time, as a restarted pod's new address gives it),
// through reloads of the configuration and then through discovery, leaves
// no series behind, whichever of them counted.
TEST(Discovery, AReplacedWorkerLeavesNoSeriesBehind) {
  Harness harness;
  const std::vector<std::string> events{"--kv-events-endpoint", "tcp://127.0.0.1:*"};
  SimProcess sim(harness, events, "sim");
  const std::string settings = "routing: {policy: cache_aware}\nhealth_check: {interval: 200ms}\n";
  auto static_worker = [&](const std::string& id) {
    return "models:\n  - name: \"sim-model\"\n    block_size: 16\n    workers:\n      " + worker_line(id, sim);
  };
  const auto request = json{{"model", "sim-model"}, {"prompt", "hello"}, {"max_tokens", 1}}.dump();
  auto serve_on = [&](const std::string& id) {
    ASSERT_TRUE(eventually([&] { return worker_ids(harness) == std::set<std::string>{id}; })) << id;
    const auto answer = post_json(harness.api_port(), "/v1/completions", request, {{"x-session-id", id}});
    ASSERT_EQ(answer.status, 200);
    ASSERT_EQ(answer.header("x-kvgate-worker"), id);
  };
  harness.start_gateway(settings, static_worker("pod-0"));
  serve_on("pod-0");
  for (int pod = 1; pod < 97; ++pod) {
    const auto id = "pod-" + std::to_string(pod);
    harness.write_config(settings, static_worker(id));
    harness.gateway().send_signal(SIGHUP);
    serve_on(id);
  }
  // Discovery polls its file once a second: the last replacements go that way.
  const auto file = harness.folder() + "/workers.yaml";
  replace_file(file, worker_line("pod-97", sim));
  harness.write_config(
      settings, "models:\n  - name: \"sim-model\"\n    block_size: 16\n    workers_from: {file: \"" + file + "\"}\n");
  harness.gateway().send_signal(SIGHUP);
  serve_on("pod-97");
  for (int pod = 98; pod < 100; ++pod) {
    const auto id = "pod-" + std::to_string(pod);
    replace_file(file, worker_line(id, sim));
    serve_on(id);
  }
  // The one that is left counts what it served (once the answer has been
  // relayed whole: the client may read it a moment before it is counted).
  std::string exposition;
  EXPECT_TRUE(eventually([&] {
    exposition = get(harness.admin_port(), "/metrics").body;
    return exposition.find(R"(kvgate_requests_total{model="sim-model",status="200",worker="pod-99"} 1)") !=
           std::string::npos;
  })) << exposition;
  EXPECT_EQ(worker_labels(exposition), (std::set<std::string>{"pod-99"})) << exposition;
}

// A DNS server for one name on 127.0.0.1: A records from a list the test
// changes, no AAAA records, NXDOMAIN for other names, SERVFAIL on demand.
class TestDnsServer {
 public:
  explicit TestDnsServer(std::string name) : name_(std::move(name)) {
    socket_ = ::socket(AF_INET, SOCK_DGRAM, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ::bind(socket_, reinterpret_cast<sockaddr*>(&address), sizeof address);
    socklen_t size = sizeof address;
    ::getsockname(socket_, reinterpret_cast<sockaddr*>(&address), &size);
    port_ = ntohs(address.sin_port);
    timeval timeout{0, 100'000};
    ::setsockopt(socket_, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
    thread_ = std::thread([this] { serve(); });
  }
  ~TestDnsServer() {
    stop_ = true;
    thread_.join();
    ::close(socket_);
  }
  void set_addresses(std::vector<std::string> addresses) {
    std::lock_guard lock(mutex_);
    addresses_ = std::move(addresses);
  }
  void set_failing(bool failing) { failing_ = failing; }
  [[nodiscard]] int port() const { return port_; }
  [[nodiscard]] int queries() const { return queries_; }

 private:
  void serve() {
    std::array<unsigned char, 512> query{};
    while (!stop_) {
      sockaddr_in from{};
      socklen_t from_size = sizeof from;
      const auto size =
          ::recvfrom(socket_, query.data(), query.size(), 0, reinterpret_cast<sockaddr*>(&from), &from_size);
      if (size < 12) {
        continue;
      }
      ++queries_;
      // The question: labels, then type and class.
      std::size_t at = 12;
      std::string name;
      while (at < static_cast<std::size_t>(size) && query[at] != 0) {
        const auto length = query[at];
        name += (name.empty() ? "" : ".") + std::string(reinterpret_cast<const char*>(&query[at + 1]), length);
        at += 1 + length;
      }
      const std::size_t question_end = at + 5;
      if (question_end > static_cast<std::size_t>(size)) {
        continue;
      }
      const int type = query[at + 1] << 8 | query[at + 2];
      std::vector<unsigned char> answer(query.begin(), query.begin() + static_cast<std::ptrdiff_t>(question_end));
      answer[2] = 0x84;  // a response, authoritative
      answer[3] = 0x80;  // recursion available, NOERROR
      answer[6] = answer[7] = answer[8] = answer[9] = answer[10] = answer[11] = 0;
      std::vector<std::string> addresses;
      if (failing_) {
        answer[3] = 0x82;  // SERVFAIL
      } else if (name != name_) {
        answer[3] = 0x83;  // NXDOMAIN
      } else if (type == 1) {
        std::lock_guard lock(mutex_);
        addresses = addresses_;
      }
      answer[7] = static_cast<unsigned char>(addresses.size());
      for (const auto& address : addresses) {
        unsigned char bytes[4];
        ::inet_pton(AF_INET, address.c_str(), bytes);
        // Name pointer to the question, type A, class IN, TTL 0, 4 bytes.
        for (int byte : {0xC0, 0x0C, 0, 1, 0, 1, 0, 0, 0, 0, 0, 4}) {
          answer.push_back(static_cast<unsigned char>(byte));
        }
        answer.insert(answer.end(), bytes, bytes + 4);
      }
      ::sendto(socket_, answer.data(), answer.size(), 0, reinterpret_cast<sockaddr*>(&from), from_size);
    }
  }
  std::string name_;
  int socket_ = -1;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  std::atomic<bool> failing_{false};
  std::atomic<int> queries_{0};
  std::mutex mutex_;
  std::vector<std::string> addresses_;
  std::thread thread_;
};

// A port free on every one of these loopback addresses.
int common_free_port(const std::vector<std::string>& hosts) {
  for (int attempt = 0; attempt < 20; ++attempt) {
    const int port = 20'000 + static_cast<int>(std::random_device{}() % 30'000);
    bool free = true;
    for (const auto& host : hosts) {
      const int probe = ::socket(AF_INET, SOCK_STREAM, 0);
      sockaddr_in address{};
      address.sin_family = AF_INET;
      address.sin_port = htons(static_cast<std::uint16_t>(port));
      ::inet_pton(AF_INET, host.c_str(), &address.sin_addr);
      free = free && ::bind(probe, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0;
      ::close(probe);
    }
    if (free) {
      return port;
    }
  }
  throw std::runtime_error("no common free port");
}

TEST(Discovery, ADnsNameFollowsItsAddressesAndABrokenLookupKeepsTheFleet) {
  Harness harness;
  const std::vector<std::string> hosts{"127.0.0.2", "127.0.0.3"};
  const int http_port = common_free_port(hosts);
  const int events_port = common_free_port(hosts);
  std::vector<std::unique_ptr<SimProcess>> sims;
  for (const auto& host : hosts) {
    sims.push_back(std::make_unique<SimProcess>(
        harness,
        std::vector<std::string>{"--host", host, "--port", std::to_string(http_port), "--kv-events-endpoint",
                                 "tcp://" + host + ":" + std::to_string(events_port)},
        "sim-" + host));
  }
  TestDnsServer dns("sims.kvgate.test");
  dns.set_addresses({"127.0.0.2"});
  harness.start_gateway(
      "routing: {policy: round_robin}\nhealth_check: {interval: 200ms}\n",
      "models:\n  - name: \"sim-model\"\n    block_size: 16\n    workers_from:\n      dns: {name: sims.kvgate.test, "
      "port: " +
          std::to_string(http_port) + ", interval: 200ms, nameserver: \"127.0.0.1:" + std::to_string(dns.port()) +
          "\", kv_events: \"tcp://{host}:" + std::to_string(events_port) + "\"}\n");
  const auto first = "127.0.0.2:" + std::to_string(http_port);
  const auto second = "127.0.0.3:" + std::to_string(http_port);
  EXPECT_EQ(worker_ids(harness), (std::set<std::string>{first}));
  SteadyTraffic traffic(harness.api_port());
  ASSERT_TRUE(eventually([&] { return worker_state(harness, first)["kv_events"]["connected"] == true; }));

  dns.set_addresses({"127.0.0.3", "127.0.0.2"});
  ASSERT_TRUE(eventually([&] { return worker_ids(harness).contains(second); }));
  ASSERT_TRUE(eventually([&] { return traffic.workers().contains(second); }));
  ASSERT_TRUE(eventually([&] { return worker_state(harness, second)["kv_events"]["connected"] == true; }));

  dns.set_addresses({"127.0.0.3"});
  ASSERT_TRUE(eventually([&] { return !worker_ids(harness).contains(first); }));

  // The DNS server fails: the fleet stays as it was.
  dns.set_failing(true);
  ASSERT_TRUE(eventually(
      [&] {
        return get(harness.admin_port(), "/metrics")
                   .body.find("kvgate_discovery_errors_total{model=\"sim-model\",source=\"dns\"}") != std::string::npos;
      },
      20s));
  EXPECT_EQ(worker_ids(harness), (std::set<std::string>{second}));
  const auto sent = traffic.sent();
  ASSERT_TRUE(eventually([&] { return traffic.sent() > sent + 10; }));
  EXPECT_EQ(traffic.failed(), 0) << traffic.failures();
}

}  // namespace
}  // namespace kvgate::testing
