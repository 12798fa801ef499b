// Tenants end to end: keys checked at the gateway and never passed on,
// each worker's own engine key sent instead, and a model that isolates
// tenants' prompt caches (kvgate-sim replicas with KV events behind it).
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <fstream>
#include <map>
#include <set>

#include <nlohmann/json.hpp>

#include "kvgate/crypto/digest.hpp"
#include "support/fleet.hpp"
#include "support/harness.hpp"

namespace kvgate::testing {
namespace {

using nlohmann::json;

std::string write_file(const std::string& path, const std::string& contents) {
  std::ofstream(path, std::ios::binary) << contents;
  return path;
}

std::string digest_of(const std::string& key) {
  return crypto::to_hex(crypto::sha256(key));
}

// A header the test upstream recorded (names as they came on the wire).
json header_of(const json& headers, std::string_view name) {
  for (const auto& [key, value] : headers.items()) {
    if (key.size() == name.size() &&
        std::equal(key.begin(), key.end(), name.begin(), [](char a, char b) { return std::tolower(a) == b; })) {
      return value;
    }
  }
  return nullptr;
}

Headers bearer(const std::string& key) {
  return {{"authorization", "Bearer " + key}};
}

TEST(Tenants, KeysAreCheckedAtTheGatewayAndNeverReachAWorker) {
  Harness harness;
  auto& keyed = harness.start_upstream("keyed");
  auto& open = harness.start_upstream("open");
  const auto acme_key = write_file(harness.folder() + "/acme.key", "acme-secret-key\n");
  const auto engine_key = write_file(harness.folder() + "/engine.key", "engine-secret-key");
  harness.start_gateway(
      "routing: {policy: round_robin}\n"
      "decision_log: " +
          harness.folder() + "/decisions.jsonl\n" +
          "tenants:\n"
          "  - {name: acme, api_key_file: " +
          acme_key +
          "}\n"
          "  - {name: beta, api_key_sha256: '" +
          digest_of("beta-secret-key") + "'}\n",
      "models:\n  - name: test-model\n    workers:\n"
      "      - {id: keyed, url: '" +
          keyed.url() + "', upstream_api_key_file: " + engine_key +
          "}\n"
          "      - {id: open, url: '" +
          open.url() + "'}\n");
  auto chat = [&](const Headers& headers) {
    return post_json(harness.api_port(), "/v1/chat/completions", chat_body(), headers);
  };
  for (const auto& headers : {Headers{}, bearer("wrong"), Headers{{"authorization", "Basic YWNtZTp4"}},
                              bearer("ACME-SECRET-KEY"), bearer("acme-secret-ke")}) {
    auto refused = chat(headers);
    EXPECT_EQ(refused.status, 401) << refused.body;
    EXPECT_EQ(json::parse(refused.body)["error"]["type"], "authentication_error");
  }
  std::map<std::string, json> seen;
  for (const auto* key : {"acme-secret-key", "beta-secret-key"}) {
    for (int turn = 0; turn < 2; ++turn) {  // round robin: both workers once per tenant
      auto response = chat(bearer(key));
      ASSERT_EQ(response.status, 200) << response.body;
      auto worker = response.header("x-kvgate-worker");
      seen[worker] = json::parse(get(harness.upstream(worker).port, "/control/last_request").body)["headers"];
    }
  }
  ASSERT_EQ(seen.size(), 2u);
  // The engine that checks keys gets its own; the other gets none. Never the tenant's.
  EXPECT_EQ(header_of(seen["keyed"], "authorization"), "Bearer engine-secret-key");
  EXPECT_TRUE(header_of(seen["open"], "authorization").is_null()) << seen["open"].dump();
  // The decision log names the tenant; nothing anywhere names a key.
  std::ifstream decisions(harness.folder() + "/decisions.jsonl");
  std::string line;
  std::set<std::string> tenants;
  while (std::getline(decisions, line)) {
    tenants.insert(json::parse(line)["tenant"].get<std::string>());
  }
  EXPECT_EQ(tenants, (std::set<std::string>{"acme", "beta"}));
  std::string everything = harness.gateway().stderr_text();
  for (const auto* path : {"/debug/workers", "/debug/sessions", "/metrics", "/"}) {
    everything += get(harness.admin_port(), path).body;
  }
  EXPECT_NE(everything.find("tenant=acme"), std::string::npos);  // the access log line
  for (const auto* secret : {"acme-secret-key", "beta-secret-key", "engine-secret-key"}) {
    EXPECT_EQ(everything.find(secret), std::string::npos) << secret;
  }
}

TEST(Tenants, WithoutTenantsTheClientsKeyPassesThroughToTheEngine) {
  Harness harness;
  harness.start_upstream("u0");
  harness.start_gateway("", harness.models_for_upstreams());
  auto response = post_json(harness.api_port(), "/v1/chat/completions", chat_body(), bearer("engine-checks-this"));
  ASSERT_EQ(response.status, 200);
  auto seen = json::parse(get(harness.upstream("u0").port, "/control/last_request").body);
  EXPECT_EQ(header_of(seen["headers"], "authorization"), "Bearer engine-checks-this");
}

// One engine for both tenants, so nothing but the salt can keep them apart.
class IsolatedTenants : public ::testing::Test {
 protected:
  void SetUp() override {
    fleet.add_sim("only");
    const auto salt = write_file(fleet.harness.folder() + "/salt", "a secret of at least sixteen bytes\n");
    auto models = fleet.models_yaml();
    models.insert(models.find("    workers:"), "    cache_isolation: tenant\n");
    fleet.harness.start_gateway(
        "routing: {policy: cache_aware}\nhealth_check: {interval: 200ms}\n"
        "security: {salt_secret_file: " +
            salt +
            "}\n"
            "tenants:\n"
            "  - {name: acme, api_key_sha256: '" +
            digest_of("acme-key") +
            "'}\n"
            "  - {name: beta, api_key_sha256: '" +
            digest_of("beta-key") + "'}\n",
        models);
    fleet.warm_up("only");
  }

  // The engine's cached tokens for the tenant's request, as relayed.
  std::uint32_t send(const std::string& key, json body) {
    auto response = post_json(fleet.harness.api_port(), "/v1/chat/completions", body.dump(), bearer(key));
    EXPECT_EQ(response.status, 200) << response.body;
    fleet.wait_synced("only");
    return json::parse(response.body)["usage"]["prompt_tokens_details"]["cached_tokens"].get<std::uint32_t>();
  }
  std::uint32_t predicted(const std::string& tenant, const json& body) {
    auto response = post_json(fleet.harness.admin_port(), "/debug/route?tenant=" + tenant, body.dump());
    EXPECT_EQ(response.status, 200) << response.body;
    return Fleet::predicted(json::parse(response.body), "only");
  }

  Fleet fleet;
};

TEST_F(IsolatedTenants, SamePromptNoHitAcrossTenantsOwnHitsPredictedExactly) {
  auto body = chat_request(
      first_turn("Our garden shed door sticks in wet weather and the hinges squeak. Which plane, which oil and which "
                 "screws do I need, and in what order should I do the work?"));
  EXPECT_EQ(predicted("acme", body), 0u);
  EXPECT_EQ(send("acme-key", body), 0u);
  // The engine holds acme's blocks of this very prompt; beta gets none of them.
  EXPECT_EQ(predicted("beta", body), 0u);
  EXPECT_EQ(send("beta-key", body), 0u);
  // Each tenant hits its own, and the index knew how much.
  const auto acme_again = predicted("acme", body);
  EXPECT_GT(acme_again, 16u);
  EXPECT_EQ(send("acme-key", body), acme_again);
  const auto beta_again = predicted("beta", body);
  EXPECT_EQ(beta_again, acme_again);
  EXPECT_EQ(send("beta-key", body), beta_again);
  // A client's own cache_salt cannot move it into another partition: the
  // tenant's salt replaces it.
  body["cache_salt"] = "chosen-by-the-client";
  EXPECT_EQ(predicted("beta", body), beta_again);
  EXPECT_EQ(send("beta-key", body), beta_again);
}

TEST_F(IsolatedTenants, SessionsAreNamespacedPerTenant) {
  auto body = chat_request(first_turn("Which sandpaper grit should I start with on an old oak table?"));
  auto response =
      post_json(fleet.harness.admin_port(), "/debug/route?tenant=acme", body.dump(), {{"x-session-id", "shared-name"}});
  ASSERT_EQ(response.status, 200);
  EXPECT_EQ(json::parse(response.body)["session"], "acme:shared-name");
  auto unknown = post_json(fleet.harness.admin_port(), "/debug/route?tenant=nobody", body.dump());
  EXPECT_EQ(unknown.status, 400) << unknown.body;
}

}  // namespace
}  // namespace kvgate::testing
