// kvgate-bench end to end: the gateway in front of kvgate-sim replicas with
// KV events, driven by the real binary; its reports are read back.
#include <gtest/gtest.h>

#include <sys/wait.h>
#include <cstdio>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

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

std::string read_file(const std::string& path) {
  std::ifstream file(path);
  std::stringstream text;
  text << file.rdbuf();
  return text.str();
}

// The same workload twice through cache_aware, replica caches reset before
// each run: the second run starts as cold as the first (without the reset
// its first turns would be cache hits), and later turns hit because the
// gateway keeps each conversation where its earlier turns are cached.
TEST(Bench, ComparesRunsFromColdCachesAndReportsHitRatesByTurn) {
  Fleet fleet;
  for (const auto* id : {"r0", "r1", "r2"}) {
    fleet.add_sim(id);
  }
  fleet.start_gateway();
  const auto target = "http://127.0.0.1:" + std::to_string(fleet.harness.api_port());
  std::string resets;
  for (const auto* id : {"r0", "r1", "r2"}) {
    resets += " --reset " + fleet.sim(id).url();
  }
  const auto out = fleet.harness.folder() + "/bench";
  auto outcome = run_bench("compare --run first=" + target + " --run second=" + target +
                           " --workload chat --sessions 6 --concurrency 3 --seed 3" + resets + " --out " + out);
  ASSERT_EQ(outcome.status, 0) << outcome.output;

  auto summary = json::parse(read_file(out + "/summary.json"));
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
  auto markdown = read_file(out + "/report.md");
  EXPECT_NE(markdown.find("| first |"), std::string::npos);
  EXPECT_NE(markdown.find("| second |"), std::string::npos);
  EXPECT_NE(read_file(out + "/report.html").find("<svg"), std::string::npos);
  EXPECT_NE(outcome.output.find("# kvgate-bench report"), std::string::npos);
}

TEST(Bench, BadInputIsAnErrorWithExitTwo) {
  Harness harness;
  auto unknown = run_bench("run --target http://127.0.0.1:9 --workload nonsense --out " + harness.folder());
  EXPECT_EQ(unknown.status, 2);
  EXPECT_NE(unknown.output.find("not a file, not a preset"), std::string::npos) << unknown.output;

  auto path = harness.folder() + "/bad.jsonl";
  std::ofstream(path) << "{\"turns\": [{\"user\": \"x\"}]}\n{\"turns\": 3}\n";
  auto malformed = run_bench("run --target http://127.0.0.1:9 --workload " + path + " --out " + harness.folder());
  EXPECT_EQ(malformed.status, 2);
  EXPECT_NE(malformed.output.find("line 2"), std::string::npos) << malformed.output;

  auto flags = run_bench("compare --target http://127.0.0.1:9 --workload chat --out " + harness.folder());
  EXPECT_EQ(flags.status, 2);
  EXPECT_NE(flags.output.find("usage:"), std::string::npos);

  // Nothing listens there: the run fails cleanly, exit 1.
  auto refused = run_bench("run --target http://127.0.0.1:9 --workload chat --sessions 1 --out " + harness.folder());
  EXPECT_EQ(refused.status, 1) << refused.output;
  EXPECT_NE(refused.output.find("/v1/models"), std::string::npos) << refused.output;
}

}  // namespace
}  // namespace kvgate::testing
