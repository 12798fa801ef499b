// The admin status page (GET /) end to end: kvgate in front of real
// kvgate-sim replicas with traffic behind it, rendered by a real browser
// (Debian's headless chromium, through scripts/screenshot.py).
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "support/admin.hpp"
#include "support/harness.hpp"
#include "support/sim_process.hpp"

namespace kvgate::testing {
namespace {

using nlohmann::json;

std::string chat(const std::string& text) {
  return json{{"model", "sim-model"},
              {"messages", json::array({{{"role", "system"}, {"content", std::string(400, 's')}},
                                        {{"role", "user"}, {"content", text}}})},
              {"max_tokens", 2},
              {"stream", true},
              {"stream_options", {{"include_usage", true}}}}
      .dump();
}

TEST(StatusPage, ShowsWorkersDecisionsAndSessionsAndRendersInABrowser) {
  Harness harness;
  const std::vector<std::string> events{"--kv-events-endpoint", "tcp://127.0.0.1:*"};
  SimProcess a(harness, events, "a");
  SimProcess b(harness, events, "b");
  SimProcess c(harness, events, "c");
  std::string workers;
  for (auto* sim : {&a, &b, &c}) {
    workers += "      - {id: " +
               std::string(sim == &a   ? "a"
                           : sim == &b ? "b"
                                       : "c") +
               ", url: \"" + sim->url() + "\", kv_events: \"" + sim->events_endpoint() + "\"}\n";
  }
  harness.start_gateway("routing: {policy: cache_aware}\n",
                        "models:\n  - name: \"sim-model\"\n    block_size: 16\n    workers:\n" + workers);
  ASSERT_TRUE(eventually([&] { return worker_state(harness, "c")["kv_events"]["connected"] == true; }));

  // Before any traffic the page says so instead of showing empty tables.
  auto empty = get(harness.admin_port(), "/");
  ASSERT_EQ(empty.status, 200);
  EXPECT_NE(empty.header("content-type").find("text/html"), std::string::npos);
  EXPECT_NE(empty.body.find("No routed request yet"), std::string::npos);

  // A session key is the client's text: the page must show it inert.
  const std::string hostile = "<script>alert(1)</script>";
  for (int turn = 0; turn < 3; ++turn) {
    for (const auto& session : {std::string("alpha"), std::string("beta"), hostile}) {
      auto response = post_json(harness.api_port(), "/v1/chat/completions",
                                chat(session + " turn " + std::to_string(turn)), {{"x-session-id", session}});
      ASSERT_EQ(response.status, 200) << response.body;
    }
  }
  auto page = get(harness.admin_port(), "/");
  ASSERT_EQ(page.status, 200);
  for (const auto* id : {">a<", ">b<", ">c<", ">alpha<", ">beta<", "&lt;script&gt;alert(1)&lt;/script&gt;"}) {
    EXPECT_NE(page.body.find(id), std::string::npos) << id;
  }
  EXPECT_EQ(page.body.find(hostile), std::string::npos);
  EXPECT_EQ(page.body.find("<script"), std::string::npos) << "the page carries no script at all";
  EXPECT_NE(page.body.find("http-equiv=\"refresh\""), std::string::npos);
  // The engines reported cached tokens for the later turns: the chart has bars.
  EXPECT_NE(page.body.find("class=\"bar\""), std::string::npos);
  EXPECT_EQ(get(harness.admin_port(), "/status").body.size() > 0, true);
  EXPECT_EQ(post_json(harness.admin_port(), "/", "{}").status, 405);

  const auto shot = std::filesystem::path(harness.folder()) / "status.png";
  const std::string command =
      "python3 " KVGATE_SOURCE_DIR "/scripts/screenshot.py http://127.0.0.1:" + std::to_string(harness.admin_port()) +
      "/ " + shot.string() + " --size 1280,1400 --table workers:3 --table decisions:9 --table sessions:3";
  EXPECT_EQ(std::system(command.c_str()), 0) << command;
  EXPECT_GT(std::filesystem::file_size(shot), 10'000u);
  // KVGATE_STATUS_PNG=path keeps the screenshot (docs/status-page.png).
  if (const char* keep = std::getenv("KVGATE_STATUS_PNG")) {
    std::filesystem::copy_file(shot, keep, std::filesystem::copy_options::overwrite_existing);
  }
}

}  // namespace
}  // namespace kvgate::testing
