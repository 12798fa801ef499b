// kvgate-bench end to end: the gateway in front of kvgate-sim replicas with
// KV events, driven by the real binary; its reports are read back.
#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cstdio>
#include <fstream>
#include <initializer_list>
#include <map>
#include <memory>
#include <set>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "../support/text_file.hpp"
#include "support/fleet.hpp"

namespace kvgate::testing {
namespace {

using nlohmann::json;

struct Outcome {
  int status = -1;
  std::string output;  // stdout and stderr
};

Outcome run_bench(const std::string& arguments) {
  auto command = std::string(KVGATE_BENCH_BINARY) + " " + arguments + " 2>&1";
  auto* pipe = ::popen(command.c_str(), "r");
  Outcome outcome;
  if (pipe == nullptr) {
    return outcome;
  }
  std::array<char, 4096> buffer{};
  for (std::size_t read; (read = std::fread(buffer.data(), 1, buffer.size(), pipe)) > 0;) {
    outcome.output.append(buffer.data(), read);
  }
  const int status = ::pclose(pipe);
  outcome.status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return outcome;
}

// kvgate-sim replicas with these ids behind one gateway; returns the
// kvgate-bench --reset flags for them.
std::string start_fleet(Fleet& fleet, std::initializer_list<const char*> ids) {
  std::string resets;
  for (const auto* id : ids) {
    fleet.add_sim(id);
    resets += " --reset " + fleet.sim(id).url();
  }
  fleet.start_gateway();
  return resets;
}

std::string api_url(Fleet& fleet) {
  return "http://127.0.0.1:" + std::to_string(fleet.harness.api_port());
}

// The same workload twice through cache_aware, replica caches reset before
// each run: the second run starts as cold as the first (without the reset
// its first turns would be cache hits), and later turns hit because the
// gateway keeps each conversation where its earlier turns are cached.
TEST(Bench, ComparesRunsFromColdCachesAndReportsHitRatesByTurn) {
  Fleet fleet;
  const auto resets = start_fleet(fleet, {"r0", "r1", "r2"});
  const auto target = api_url(fleet);
  const auto out = fleet.harness.folder() + "/bench";
  auto outcome = run_bench("compare --run first=" + target + " --run second=" + target +
                           " --workload chat --sessions 6 --concurrency 3 --seed 3" + resets + " --out " + out);
  ASSERT_EQ(outcome.status, 0) << outcome.output;

  auto summary = json::parse(test_support::read_text_file(out + "/summary.json"));
  ASSERT_EQ(summary["runs"].size(), 2u);
  for (const auto& run : summary["runs"]) {
    SCOPED_TRACE(run["name"].get<std::string>());
    EXPECT_EQ(run["errors"], 0) << run["error_kinds"].dump();
    EXPECT_GE(run["requests"].get<int>(), 6 * 4);  // the chat preset gives each session 4 to 8 turns
    const auto& by_turn = run["hit_rate_by_turn"];
    ASSERT_GE(by_turn.size(), 4u);
    EXPECT_LT(by_turn[0]["hit_rate"].get<double>(), 0.9);
    for (std::size_t turn = 1; turn < 4; ++turn) {
      EXPECT_GT(by_turn[turn]["hit_rate"].get<double>(), 0.6) << "turn " << turn + 1;
    }
    EXPECT_GT(run["ttft_ms"]["p50"].get<double>(), 0.0);
  }
  EXPECT_EQ(summary["runs"][0]["prompt_tokens"], summary["runs"][1]["prompt_tokens"]);
  auto markdown = test_support::read_text_file(out + "/report.md");
  EXPECT_NE(markdown.find("| first |"), std::string::npos);
  EXPECT_NE(markdown.find("| second |"), std::string::npos);
  EXPECT_NE(test_support::read_text_file(out + "/report.html").find("<svg"), std::string::npos);
  EXPECT_NE(outcome.output.find("# kvgate-bench report"), std::string::npos);
}

// Requests served by this gateway (its kvgate_requests_total, summed).
double requests_served(int admin_port) {
  const auto text = get(admin_port, "/metrics").body;
  double total = 0;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    if (line.starts_with("kvgate_requests_total{")) {
      total += std::stod(line.substr(line.rfind(' ') + 1));
    }
  }
  return total;
}

double sessions_held(int admin_port) {
  const auto text = get(admin_port, "/metrics").body;
  const auto at = text.find("\nkvgate_sessions_active ");
  return at == std::string::npos ? -1 : std::stod(text.substr(at + 24));
}

// Two gateways in front of the same sims, the client alternating between
// them turn by turn (a session's consecutive turns land on both): each gateway
// learns where the prefixes are from the engines' events, not from its own
// routing, so the later turns hit about as often as through one gateway.
// Joined by '|' the gateways take whole sessions in turn instead.
TEST(Bench, TwoGatewaysTakingTurnsKeepTheConversationsCached) {
  Fleet fleet;
  const auto resets = start_fleet(fleet, {"r0", "r1", "r2"});
  Harness second;
  fleet.start_another_gateway(second);
  Harness third;
  fleet.start_another_gateway(third);
  const auto one = api_url(fleet);
  const auto two = one + "+http://127.0.0.1:" + std::to_string(second.api_port());
  const auto by_session = one + "|http://127.0.0.1:" + std::to_string(third.api_port());
  const auto out = fleet.harness.folder() + "/bench";
  auto outcome = run_bench("compare --run one=" + one + " --run two=" + two + " --run sessions='" + by_session +
                           "' --workload chat --sessions 8 --concurrency 4 --seed 3" + resets + " --out " + out);
  ASSERT_EQ(outcome.status, 0) << outcome.output;
  auto summary = json::parse(test_support::read_text_file(out + "/summary.json"));
  ASSERT_EQ(summary["runs"].size(), 3u);
  // Per request, every session (the chat preset's have 4 to 8 turns) sent
  // its first two turns to different gateways, so the second saw all 8;
  // per session, the third saw the odd-numbered sessions only, every turn.
  EXPECT_EQ(sessions_held(second.admin_port()), 8);
  EXPECT_EQ(sessions_held(third.admin_port()), 4);
  EXPECT_EQ(summary["runs"][2]["errors"], 0) << summary["runs"][2]["error_kinds"].dump();
  const auto& alone = summary["runs"][0];
  const auto& pair = summary["runs"][1];
  EXPECT_EQ(pair["errors"], 0) << pair["error_kinds"].dump();
  // The second gateway served only the pair's run, about half of it: a
  // session with an odd number of turns gives one gateway one more, at most
  // half a request off even per session.
  const double requests = pair["requests"].get<double>();
  const double second_served = requests_served(second.admin_port());
  EXPECT_GE(second_served, requests / 2 - 4);
  EXPECT_LE(second_served, requests / 2 + 4 + 1);  // + its /v1/models lookup
  // Later turns: a session's history is found through the other gateway's
  // routing as well (8 sessions: a loose margin, the benchmark measures).
  auto later_turn_hits = [](const json& run) {
    double cached = 0;
    double prompt = 0;
    for (const auto& turn : run["hit_rate_by_turn"]) {
      if (turn["turn"].get<int>() >= 2) {
        cached += turn["cached_tokens"].get<double>();
        prompt += turn["prompt_tokens"].get<double>();
      }
    }
    return prompt > 0 ? cached / prompt : 0.0;
  };
  EXPECT_GT(later_turn_hits(alone), 0.5);
  EXPECT_GT(later_turn_hits(pair), later_turn_hits(alone) - 0.15)
      << "one gateway " << later_turn_hits(alone) << ", two " << later_turn_hits(pair);
}

TEST(Bench, BadInputIsAnErrorWithExitTwo) {
  Harness harness;
  auto unknown = run_bench("run --target http://127.0.0.1:9 --workload nonsense --out " + harness.folder());
  EXPECT_EQ(unknown.status, 2);
  EXPECT_NE(unknown.output.find("not a file, not a preset"), std::string::npos) << unknown.output;

  auto path = harness.folder() + "/bad.jsonl";
  std::ofstream(path) << "{\"turns\": [{\"user\": \"x\"}]}\n{\"turns\": 3}\n";
  auto malformed =
      run_bench("run --strict --target http://127.0.0.1:9 --workload " + path + " --out " + harness.folder());
  EXPECT_EQ(malformed.status, 2);
  EXPECT_NE(malformed.output.find("line 2"), std::string::npos) << malformed.output;
  // Not strict: the line is skipped and named with its file, the rest runs
  // (here against nothing: exit 1).
  auto skipped = run_bench("run --target http://127.0.0.1:9 --workload " + path + " --out " + harness.folder());
  EXPECT_EQ(skipped.status, 1) << skipped.output;
  EXPECT_NE(skipped.output.find("skipped " + path + ": line 2"), std::string::npos) << skipped.output;

  auto no_capacity = run_bench("run --load 0.7 --target http://127.0.0.1:9 --workload chat --out " + harness.folder());
  EXPECT_EQ(no_capacity.status, 2);
  EXPECT_NE(no_capacity.output.find("--prefill-tokens-per-s"), std::string::npos) << no_capacity.output;
  auto no_slo = run_bench("capacity --run a=http://127.0.0.1:9 --workload chat --reset http://127.0.0.1:9 --out " +
                          harness.folder());
  EXPECT_EQ(no_slo.status, 2);
  EXPECT_NE(no_slo.output.find("--slo-p90-ttft-ms"), std::string::npos) << no_slo.output;

  auto flags = run_bench("compare --target http://127.0.0.1:9 --workload chat --out " + harness.folder());
  EXPECT_EQ(flags.status, 2);
  EXPECT_NE(flags.output.find("usage:"), std::string::npos);

  // Nothing listens there: the run fails cleanly, exit 1.
  auto refused = run_bench("run --target http://127.0.0.1:9 --workload chat --sessions 1 --out " + harness.folder());
  EXPECT_EQ(refused.status, 1) << refused.output;
  EXPECT_NE(refused.output.find("/v1/models"), std::string::npos) << refused.output;
}

bool answers(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  address.sin_port = htons(static_cast<std::uint16_t>(port));
  const bool connected = ::connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0;
  ::close(fd);
  return connected;
}

// GET PATH on a loopback port: the body, or "" when nothing answered 200.
std::string get_body(int port, const std::string& path) {
  const auto command = "curl -fsS -m 2 http://127.0.0.1:" + std::to_string(port) + path + " 2>/dev/null";
  auto* pipe = ::popen(command.c_str(), "r");
  std::string body;
  if (pipe == nullptr) {
    return body;
  }
  std::array<char, 4096> buffer{};
  for (std::size_t read; (read = std::fread(buffer.data(), 1, buffer.size(), pipe)) > 0;) {
    body.append(buffer.data(), read);
  }
  return ::pclose(pipe) == 0 ? body : std::string();
}

// The Rust routers (smg, vllm-router) listen before their workers have
// passed a health check; their /readiness counts the healthy ones.
bool router_ready(int port, std::size_t workers) {
  auto body = json::parse(get_body(port, "/readiness"), nullptr, false);
  return body.is_object() && body.value("healthy_workers", std::size_t{0}) == workers;
}

bool is_rust_router(const std::string& kind) {
  return kind.starts_with("smg_") || kind.starts_with("vllm_router_");
}

// A peer load balancer (bench/peers/peer.sh) in front of the replicas; it
// announces nothing, so its port (and a router's readiness) is polled.
std::unique_ptr<ChildProcess> start_peer(const std::string& kind, int port, const std::string& folder,
                                         const std::vector<std::string>& replicas) {
  std::vector<std::string> argv{"/bin/bash", std::string(KVGATE_SOURCE_DIR) + "/bench/peers/peer.sh", kind,
                                std::to_string(port), folder + "/" + kind};
  argv.insert(argv.end(), replicas.begin(), replicas.end());
  auto peer = std::make_unique<ChildProcess>(argv, folder + "/" + kind + ".log");
  auto ready = [&] { return answers(port) && (!is_rust_router(kind) || router_ready(port, replicas.size())); };
  // Up to a minute: the Rust routers start behind a Python launcher, on a
  // machine running other suites.
  for (int attempt = 0; attempt < 2400 && !ready(); ++attempt) {
    std::this_thread::sleep_for(std::chrono::milliseconds(25));  // start-up poll of a process that announces nothing
  }
  return peer;
}

// The peers a user would deploy instead, as kvgate-bench targets: each
// conversation of nginx's and HAProxy's sticky setups stays on one replica
// (told by the simulator's own header: nothing of kvgate in between), and
// leastconn spreads them; SGLang's gateway and vLLM's router, as their
// wheels ship them, answer every request through a replica; kvgate's run is
// compared in the same report.
TEST(Bench, PeersAreTargetsLikeAnyOther) {
  Fleet fleet;
  const auto resets = start_fleet(fleet, {"r0", "r1", "r2"});
  std::vector<std::string> replicas;
  for (const auto* id : {"r0", "r1", "r2"}) {
    replicas.push_back(fleet.sim(id).url());
  }
  std::vector<std::unique_ptr<ChildProcess>> peers;
  std::string runs = " --run kvgate=" + api_url(fleet);
  const std::vector<std::string> kinds{"nginx_sticky", "haproxy_sticky", "haproxy_leastconn", "smg_cache_aware",
                                       "vllm_router_cache_aware"};
  for (const auto& kind : kinds) {
    const int port = free_loopback_port();
    peers.push_back(start_peer(kind, port, fleet.harness.folder(), replicas));
    ASSERT_TRUE(answers(port)) << kind << ": " << peers.back()->stderr_text();
    ASSERT_TRUE(!is_rust_router(kind) || router_ready(port, replicas.size()))
        << kind << ": " << peers.back()->stderr_text();
    runs += std::string(" --run ") + kind + "=http://127.0.0.1:" + std::to_string(port);
  }
  const auto out = fleet.harness.folder() + "/peers";
  auto outcome = run_bench("compare" + runs + " --workload chat --sessions 6 --concurrency 3 --seed 5" + resets +
                           " --baseline nginx_sticky --fleet 'three sims' --out " + out);
  ASSERT_EQ(outcome.status, 0) << outcome.output;
  auto summary = json::parse(test_support::read_text_file(out + "/summary.json"));
  ASSERT_EQ(summary["runs"].size(), kinds.size() + 1);
  for (const auto& run : summary["runs"]) {
    const auto name = run["name"].get<std::string>();
    SCOPED_TRACE(name);
    EXPECT_EQ(run["errors"], 0) << run["error_kinds"].dump();
    // Every request was answered by a named replica.
    std::uint64_t named = 0;
    for (const auto& [worker, count] : run["requests_per_worker"].items()) {
      EXPECT_TRUE(worker == "r0" || worker == "r1" || worker == "r2") << worker;
      named += count.get<std::uint64_t>();
    }
    EXPECT_EQ(named, run["succeeded"].get<std::uint64_t>());
  }
  // Sticky peers keep each session on one replica.
  for (const auto* sticky : {"nginx_sticky", "haproxy_sticky"}) {
    std::map<std::size_t, std::set<std::string>> replicas_of;
    std::istringstream records(test_support::read_text_file(out + "/records-" + sticky + ".jsonl"));
    for (std::string line; std::getline(records, line);) {
      auto record = json::parse(line);
      replicas_of[record["session"].get<std::size_t>()].insert(record["worker"].get<std::string>());
    }
    ASSERT_EQ(replicas_of.size(), 6u) << sticky;
    for (const auto& [session, used] : replicas_of) {
      EXPECT_EQ(used.size(), 1u) << sticky << " session " << session;
    }
  }
  auto markdown = test_support::read_text_file(out + "/report.md");
  EXPECT_NE(markdown.find("Against `nginx_sticky`"), std::string::npos) << markdown;
  EXPECT_NE(markdown.find("Fleet: three sims."), std::string::npos) << markdown;
  EXPECT_NE(test_support::read_text_file(out + "/report.html").find("data-chart='worker-timeline'"), std::string::npos);
  for (auto& peer : peers) {
    peer->stop();
  }
}

// A peer that could not be started (not installed, or it failed to come
// up) is named in the report with the reason, beside the runs that did
// happen: no row of zeros that reads as a measurement, and the comparison
// still completes.
TEST(Bench, ATargetThatDidNotStartIsNamedNotCountedAsZeros) {
  Fleet fleet;
  const auto resets = start_fleet(fleet, {"r0", "r1"});
  const auto out = fleet.harness.folder() + "/absent";
  auto outcome = run_bench("compare --run kvgate=" + api_url(fleet) +
                           " --unavailable 'ghost=no binary installed here' --workload chat --sessions 3 --seed 2" +
                           resets + " --baseline ghost --out " + out);
  ASSERT_EQ(outcome.status, 0) << outcome.output;
  auto summary = json::parse(test_support::read_text_file(out + "/summary.json"));
  ASSERT_EQ(summary["runs"].size(), 2u);
  EXPECT_EQ(summary["runs"][0]["name"], "kvgate");
  EXPECT_FALSE(summary["runs"][0].contains("failure"));
  EXPECT_GT(summary["runs"][0]["succeeded"].get<std::uint64_t>(), 0u);
  EXPECT_EQ(summary["runs"][1]["name"], "ghost");
  EXPECT_EQ(summary["runs"][1]["failure"], "did not start: no binary installed here");
  auto markdown = test_support::read_text_file(out + "/report.md");
  EXPECT_NE(markdown.find("| ghost | failed (below) |"), std::string::npos) << markdown;
  EXPECT_NE(markdown.find("Run `ghost` failed: did not start: no binary installed here"), std::string::npos)
      << markdown;
  // A baseline that did not run has nothing to be compared with.
  EXPECT_EQ(markdown.find("Against `ghost`"), std::string::npos) << markdown;

  // It names a target of a comparison, not of a single run.
  auto misplaced = run_bench("run --target " + api_url(fleet) + " --unavailable ghost=x --workload chat --out " + out);
  EXPECT_EQ(misplaced.status, 2);
  EXPECT_NE(misplaced.output.find("--unavailable goes with compare or capacity"), std::string::npos)
      << misplaced.output;
}

// The load dial against real replicas: the rate comes from the replicas'
// own prefill capacity, sessions arrive open loop, and the utilisation the
// replicas measured is reported next to the load asked for.
TEST(Bench, TheLoadDialSetsTheRateAndReportsTheMeasuredUtilisation) {
  Fleet fleet;
  const auto resets = start_fleet(fleet, {"r0", "r1"});
  const auto target = api_url(fleet);
  const auto out = fleet.harness.folder() + "/dial";
  auto outcome = run_bench("run --name dialled --target " + target + " --workload chat --sessions 8 --load 0.3" +
                           resets + " --out " + out);
  ASSERT_EQ(outcome.status, 0) << outcome.output;
  auto summary = json::parse(test_support::read_text_file(out + "/summary.json"));
  EXPECT_EQ(summary["errors"], 0);
  const auto& dial = summary["dial"];
  EXPECT_DOUBLE_EQ(dial["load"].get<double>(), 0.3);
  EXPECT_GT(dial["fleet_prefill_tokens_per_s"].get<double>(), 0);
  EXPECT_GT(dial["sessions_per_minute"].get<double>(), 0);
  ASSERT_TRUE(summary.contains("measured_prefill_utilisation")) << summary.dump();
  EXPECT_GT(summary["measured_prefill_utilisation"].get<double>(), 0);
  EXPECT_LE(summary["measured_prefill_utilisation"].get<double>(), summary["measured_busy_fraction"].get<double>());
  EXPECT_GT(summary["ceiling_tokens"].get<std::uint64_t>(), 0u);
  EXPECT_LE(summary["cached_tokens"].get<std::uint64_t>(), summary["prompt_tokens"].get<std::uint64_t>());
}

// Capacity against real replicas, bounded to three steps: every step runs
// from reset caches, a generous SLO holds at the first load and doubles
// it, and the report names the highest load that held with its rate.
TEST(Bench, CapacitySearchesLoadsAgainstTheSlo) {
  Fleet fleet;
  const auto resets = start_fleet(fleet, {"r0", "r1"});
  const auto target = api_url(fleet);
  const auto out = fleet.harness.folder() + "/capacity";
  auto outcome = run_bench("capacity --run gw=" + target + " --workload chat --sessions 4 --slo-p90-ttft-ms 60000" +
                           " --start-load 0.1 --max-steps 3" + resets + " --out " + out);
  ASSERT_EQ(outcome.status, 0) << outcome.output;
  auto capacity = json::parse(test_support::read_text_file(out + "/capacity.json"));
  ASSERT_EQ(capacity["targets"].size(), 1u);
  const auto& target_result = capacity["targets"][0];
  ASSERT_EQ(target_result["steps"].size(), 3u);
  EXPECT_DOUBLE_EQ(target_result["steps"][0]["load"].get<double>(), 0.1);
  EXPECT_DOUBLE_EQ(target_result["steps"][1]["load"].get<double>(), 0.2);
  EXPECT_DOUBLE_EQ(target_result["capacity_load"].get<double>(), 0.4);
  EXPECT_GT(target_result["capacity"]["sessions_per_minute"].get<double>(), 0);
  EXPECT_NE(test_support::read_text_file(out + "/report.md").find("| gw | 40.0% |"), std::string::npos)
      << test_support::read_text_file(out + "/report.md");
  EXPECT_NE(test_support::read_text_file(out + "/report.html").find("data-chart='capacity'"), std::string::npos);
}

}  // namespace
}  // namespace kvgate::testing
