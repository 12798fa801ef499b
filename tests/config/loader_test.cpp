#include "kvgate/config/loader.hpp"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

namespace kvgate::config {
namespace {

const char* kMinimal = R"(models:
  - name: m
    workers:
      - id: w0
        url: http://127.0.0.1:8001
)";

TEST(ConfigLoader, MinimalFileGetsDocumentedDefaults) {
  auto loaded = load_text(kMinimal, "minimal.yaml");
  ASSERT_TRUE(loaded);
  EXPECT_EQ(loaded->listen.to_string(), "127.0.0.1:8080");
  EXPECT_EQ(loaded->admin_listen.to_string(), "127.0.0.1:9090");
  EXPECT_EQ(loaded->routing.policy, PolicyKind::cache_aware);
  EXPECT_EQ(loaded->limits.max_body_bytes, 16u * 1024 * 1024);
  EXPECT_EQ(loaded->timeouts.upstream_connect, Milliseconds(2000));
  EXPECT_EQ(loaded->upstream.retries, 1u);
  ASSERT_EQ(loaded->models.size(), 1u);
  EXPECT_EQ(loaded->models[0].block_size, 16u);
  EXPECT_EQ(loaded->models[0].workers[0].endpoint.authority.port, 8001);
}

TEST(ConfigLoader, AClusterSectionJoinsAClusterAndItsAbsenceRunsAlone) {
  auto alone = load_text(kMinimal, "alone.yaml");
  ASSERT_TRUE(alone);
  EXPECT_FALSE(alone->cluster);
  auto joined =
      load_text(std::string("cluster:\n  url: redis://10.0.0.5:6380\n  replica_id: gw-1\n") + kMinimal, "cluster.yaml");
  ASSERT_TRUE(joined) << joined.error().front().to_string();
  ASSERT_TRUE(joined->cluster);
  EXPECT_EQ(joined->cluster->url.host, "10.0.0.5");
  EXPECT_EQ(joined->cluster->url.port, 6380);
  EXPECT_EQ(joined->cluster->replica_id, "gw-1");
  EXPECT_EQ(joined->cluster->stream, "kvgate");
  EXPECT_EQ(joined->cluster->peer_timeout, Milliseconds(3'000));
}

TEST(ConfigLoader, ReadsEveryKey) {
  auto loaded = load_text(R"(listen: "0.0.0.0:8000"
admin_listen: "127.0.0.1:9100"
threads: 3
log_level: debug
access_log: false
api_keys: ["k1", "k2"]
limits: {max_body_size: 1MiB, max_header_size: 16KiB, max_connections: 50}
timeouts:
  header_read: 1s
  body_read: 2s
  keep_alive_idle: 3s
  client_write: 4s
  upstream_connect: 250ms
  upstream_response: 2m
  upstream_idle: 1h
  shutdown_grace: 7s
upstream: {retries: 2, max_idle_connections: 8, idle_connection_timeout: 9s}
health_check: {enabled: true, path: /ping, interval: 500ms, timeout: 100ms, unhealthy_threshold: 4,
               healthy_threshold: 1, passive_failures: 0}
routing: {policy: round_robin}
decision_log: /tmp/decisions.jsonl
models:
  - name: qwen3
    tokenizer: /models/qwen3
    block_size: 32
    workers:
      - id: a
        url: http://10.0.0.1:8000
        kv_events: tcp://10.0.0.1:5557
        kv_events_replay: tcp://10.0.0.1:5558
)",
                          "full.yaml");
  ASSERT_TRUE(loaded) << loaded.error().front().to_string();
  EXPECT_EQ(loaded->threads, 3u);
  EXPECT_FALSE(loaded->access_log);
  // The deprecated list: one tenant per key, only its digest kept.
  ASSERT_EQ(loaded->tenants.size(), 2u);
  EXPECT_EQ(loaded->tenants[1].name, "api-key-2");
  EXPECT_EQ(loaded->tenants[1].api_key_sha256, crypto::sha256("k2"));
  ASSERT_EQ(loaded->deprecations.size(), 1u);
  EXPECT_NE(loaded->deprecations[0].find("api_keys"), std::string::npos);
  EXPECT_EQ(loaded->limits.max_body_bytes, 1024u * 1024);
  EXPECT_EQ(loaded->limits.max_header_bytes, 16u * 1024);
  EXPECT_EQ(loaded->timeouts.client_write, Milliseconds(4000));
  EXPECT_EQ(loaded->timeouts.upstream_response, Milliseconds(120'000));
  EXPECT_EQ(loaded->timeouts.upstream_idle, Milliseconds(3'600'000));
  EXPECT_EQ(loaded->upstream.retries, 2u);
  EXPECT_EQ(loaded->health_check.path, "/ping");
  // The deprecated passive_failures sets the outlier threshold.
  EXPECT_EQ(loaded->outlier_detection.consecutive_failures, 0u);
  EXPECT_EQ(loaded->routing.policy, PolicyKind::round_robin);
  EXPECT_EQ(loaded->decision_log, "/tmp/decisions.jsonl");
  EXPECT_EQ(loaded->models[0].block_size, 32u);
  EXPECT_EQ(loaded->models[0].workers[0].kv_events_replay, "tcp://10.0.0.1:5558");
}

struct BadConfig {
  const char* name;
  std::string text;
  int line;
  std::string path;
  std::string message;  // a substring of the problem's message
};

std::string with_models(const std::string& head) {
  return head + kMinimal;
}

class BadConfigs : public testing::TestWithParam<BadConfig> {};

TEST_P(BadConfigs, ReportPathLineAndReason) {
  const auto& bad = GetParam();
  auto loaded = load_text(bad.text, "bad.yaml");
  ASSERT_FALSE(loaded) << bad.name;
  bool found = false;
  for (const auto& problem : loaded.error()) {
    if (problem.path == bad.path && problem.line == bad.line &&
        problem.message.find(bad.message) != std::string::npos) {
      found = true;
    }
  }
  std::string all;
  for (const auto& problem : loaded.error()) {
    all += problem.to_string() + "\n";
  }
  EXPECT_TRUE(found) << "expected " << bad.path << " at line " << bad.line << " (" << bad.message << "), got:\n" << all;
}

INSTANTIATE_TEST_SUITE_P(
    Loader, BadConfigs,
    testing::Values(
        BadConfig{"unknown_top_key", with_models("lisen: 1\n"), 1, "lisen", "unknown key"},
        BadConfig{"cluster_nats", with_models("cluster:\n  engine: nats\n"), 2, "cluster.engine", "unknown engine"},
        BadConfig{"cluster_url_scheme", with_models("cluster:\n  url: 127.0.0.1:6379\n"), 2, "cluster.url",
                  "redis://host:port"},
        BadConfig{"cluster_url_port", with_models("cluster:\n  url: redis://127.0.0.1\n"), 2, "cluster.url",
                  "redis://host:port"},
        BadConfig{"cluster_replica_id", with_models("cluster:\n  replica_id: \"a b\"\n"), 2, "cluster.replica_id",
                  "letters, digits"},
        BadConfig{"cluster_peer_timeout", with_models("cluster:\n  load_interval: 1s\n  peer_timeout: 1500ms\n"), 3,
                  "cluster.peer_timeout", "twice load_interval"},
        BadConfig{"cluster_unknown_key", with_models("cluster:\n  peers: [a]\n"), 2, "cluster.peers", "unknown key"},
        BadConfig{"duplicate_top_key", with_models("threads: 1\nthreads: 2\n"), 2, "threads", "more than once"},
        BadConfig{"bad_duration", with_models("timeouts:\n  upstream_connect: 5\n"), 2, "timeouts.upstream_connect",
                  "invalid duration '5'"},
        BadConfig{"fraction_duration", with_models("timeouts:\n  body_read: 1.5s\n"), 2, "timeouts.body_read",
                  "invalid duration"},
        BadConfig{"zero_duration", with_models("timeouts:\n  header_read: 0ms\n"), 2, "timeouts.header_read",
                  "at least 1ms"},
        BadConfig{"unknown_timeout", with_models("timeouts:\n  connect: 1s\n"), 2, "timeouts.connect", "unknown key"},
        BadConfig{"threads_not_number", with_models("threads: many\n"), 1, "threads", "whole number"},
        BadConfig{"threads_too_large", with_models("threads: 5000\n"), 1, "threads", "between 0 and 256"},
        BadConfig{"bool_wrong", with_models("access_log: sometimes\n"), 1, "access_log", "true or false"},
        BadConfig{"bad_listen", with_models("listen: localhost\n"), 1, "listen", "expected host:port"},
        BadConfig{"bad_size", with_models("limits:\n  max_body_size: 10 MB\n"), 2, "limits.max_body_size",
                  "invalid size"},
        BadConfig{"policy_unknown", with_models("routing:\n  policy: random\n"), 2, "routing.policy",
                  "unknown policy 'random'"},
        BadConfig{"prefix_blocks_zero", with_models("routing:\n  prefix_hash: {prefix_blocks: 0}\n"), 2,
                  "routing.prefix_hash.prefix_blocks", "between 1 and"},
        BadConfig{"prefix_hash_unknown_key", with_models("routing:\n  prefix_hash: {blocks: 2}\n"), 2,
                  "routing.prefix_hash.blocks", "unknown key"},
        BadConfig{"cost_not_number", with_models("routing:\n  cache_aware: {prefill_ms_per_token: fast}\n"), 2,
                  "routing.cache_aware.prefill_ms_per_token", "expected a number"},
        BadConfig{"cost_negative", with_models("routing:\n  cache_aware:\n    queue_ms_per_request: -1\n"), 3,
                  "routing.cache_aware.queue_ms_per_request", "between 0 and"},
        BadConfig{"index_ttl_bad", with_models("index:\n  speculative_ttl: soon\n"), 2, "index.speculative_ttl",
                  "invalid duration"},
        BadConfig{"kv_events_unknown", with_models("kv_events:\n  replay: 1s\n"), 2, "kv_events.replay", "unknown key"},
        BadConfig{"capacity_zero",
                  "models:\n  - name: m\n    workers:\n      - {id: a, url: 'http://a:1', kv_capacity_blocks: 0}\n", 4,
                  "models[0].workers[0].kv_capacity_blocks", "between 1 and"},
        BadConfig{"scrape_path_relative", with_models("metrics_scrape:\n  path: metrics\n"), 2, "metrics_scrape.path",
                  "must start with '/'"},
        BadConfig{"worker_scrape_interval_short",
                  "models:\n  - name: m\n    workers:\n      - {id: a, url: 'http://a:1', scrape_interval: 10ms}\n", 4,
                  "models[0].workers[0].scrape_interval", ""},
        BadConfig{"scrape_interval_too_short", with_models("metrics_scrape:\n  interval: 10ms\n"), 2,
                  "metrics_scrape.interval", "at least 100ms"},
        BadConfig{"log_level_unknown", with_models("log_level: loud\n"), 1, "log_level", "unknown log level"},
        BadConfig{"models_missing", "threads: 1\n", 1, "models", "missing"},
        BadConfig{"models_not_list", "models: {name: m}\n", 1, "models", "expected a list"},
        BadConfig{"worker_missing_url", "models:\n  - name: m\n    workers:\n      - id: w0\n", 4,
                  "models[0].workers[0].url", "missing"},
        BadConfig{"worker_https", "models:\n  - name: m\n    workers:\n      - id: w0\n        url: https://x:1\n", 5,
                  "models[0].workers[0].url", "https upstreams are not supported"},
        BadConfig{"worker_unknown_key",
                  "models:\n  - name: m\n    workers:\n      - id: w0\n        url: http://x:1\n        weight: 2\n", 6,
                  "models[0].workers[0].weight", "unknown key"},
        BadConfig{"duplicate_worker_id",
                  "models:\n  - name: m\n    workers:\n      - {id: w0, url: 'http://a:1'}\n      - {id: w0, url: "
                  "'http://b:1'}\n",
                  5, "models[0].workers[1].id", "duplicate worker id 'w0'"},
        BadConfig{"duplicate_worker_url",
                  "models:\n  - name: m\n    workers:\n      - {id: w0, url: 'http://a:1'}\n  - name: n\n    "
                  "workers:\n      - {id: w1, url: 'http://a:1'}\n",
                  7, "models[1].workers[0].url", "used by another worker"},
        BadConfig{"duplicate_model",
                  "models:\n  - name: m\n    workers: [{id: a, url: 'http://a:1'}]\n  - name: m\n    workers: [{id: "
                  "b, url: 'http://b:1'}]\n",
                  4, "models[1].name", "duplicate model name"},
        BadConfig{"no_workers", "models:\n  - name: m\n    workers: []\n", 3, "models[0].workers",
                  "at least one worker"},
        BadConfig{"block_size_zero",
                  "models:\n  - name: m\n    block_size: 0\n    workers: [{id: a, url: 'http://a:1'}]\n", 3,
                  "models[0].block_size", "between 1 and 4096"},
        BadConfig{
            "kv_events_not_zmq",
            "models:\n  - name: m\n    workers:\n      - {id: a, url: 'http://a:1', kv_events: 'http://a:5557'}\n", 4,
            "models[0].workers[0].kv_events", "ZMQ address"},
        BadConfig{"health_path_relative", with_models("health_check:\n  path: health\n"), 2, "health_check.path",
                  "must start with '/'"},
        BadConfig{
            "tenant_two_key_sources",
            with_models("tenants:\n  - {name: a, api_key_env: HOME, api_key_sha256: '" + std::string(64, 'a') + "'}\n"),
            2, "tenants[0]", "exactly one of"},
        BadConfig{"tenant_no_key", with_models("tenants:\n  - {name: a}\n"), 2, "tenants[0]", "exactly one of"},
        BadConfig{"tenant_digest_short", with_models("tenants:\n  - {name: a, api_key_sha256: abc}\n"), 2,
                  "tenants[0].api_key_sha256", "64 hexadecimal digits"},
        BadConfig{"tenant_env_unset", with_models("tenants:\n  - {name: a, api_key_env: KVGATE_TEST_UNSET_VARIABLE}\n"),
                  2, "tenants[0].api_key_env", "is not set"},
        BadConfig{"tenant_file_missing", with_models("tenants:\n  - {name: a, api_key_file: /nonexistent/key}\n"), 2,
                  "tenants[0].api_key_file", "/nonexistent/key: cannot be opened"},
        BadConfig{"tenant_name_bad",
                  with_models("tenants:\n  - {name: 'a b', api_key_sha256: '" + std::string(64, 'a') + "'}\n"), 2,
                  "tenants[0].name", "letters, digits"},
        BadConfig{"tenant_duplicate_name",
                  with_models("tenants:\n  - {name: a, api_key_sha256: '" + std::string(64, 'a') +
                              "'}\n  - {name: a, api_key_sha256: '" + std::string(64, 'b') + "'}\n"),
                  3, "tenants[1].name", "duplicate tenant name"},
        BadConfig{"tenant_same_key",
                  with_models("tenants:\n  - {name: a, api_key_sha256: '" + std::string(64, 'a') +
                              "'}\n  - {name: b, api_key_sha256: '" + std::string(64, 'A') + "'}\n"),
                  3, "tenants[1]", "the same API key as tenants[0]"},
        BadConfig{"tenant_weight_zero",
                  with_models("tenants:\n  - {name: a, weight: 0, api_key_sha256: '" + std::string(64, 'a') + "'}\n"),
                  2, "tenants[0].weight", "between"},
        BadConfig{
            "tenants_and_api_keys",
            with_models("api_keys: [k]\ntenants:\n  - {name: a, api_key_sha256: '" + std::string(64, 'a') + "'}\n"), 1,
            "api_keys", "not both"},
        BadConfig{"listen_without_listener",
                  "models:\n  - name: m\n    workers:\n      - {id: a, url: 'http://a:1', kv_events: listen}\n", 4,
                  "models[0].workers[0].kv_events", "needs kv_events.listen"},
        BadConfig{"listener_not_zmq", with_models("kv_events: {listen: '0.0.0.0:5557'}\n"), 1, "kv_events.listen",
                  "expected a ZMQ address to bind"},
        BadConfig{"stand_in_unknown",
                  "models:\n  - name: m\n    stand_in_tokenizer: gpt2\n    workers: [{id: a, url: 'http://a:1'}]\n", 3,
                  "models[0].stand_in_tokenizer", "unknown stand_in_tokenizer 'gpt2'"},
        BadConfig{"isolation_unknown",
                  "models:\n  - name: m\n    cache_isolation: user\n    workers: [{id: a, url: 'http://a:1'}]\n", 3,
                  "models[0].cache_isolation", "unknown cache_isolation 'user'"},
        BadConfig{"isolation_without_tenants",
                  "models:\n  - name: m\n    cache_isolation: tenant\n    workers: [{id: a, url: 'http://a:1'}]\n", 3,
                  "models[0].cache_isolation", "needs tenants"},
        BadConfig{"isolation_without_secret",
                  "tenants:\n  - {name: a, api_key_sha256: '" + std::string(64, 'a') +
                      "'}\nmodels:\n  - name: m\n    cache_isolation: tenant\n    workers: [{id: a, url: "
                      "'http://a:1'}]\n",
                  5, "models[0].cache_isolation", "security.salt_secret_file"},
        BadConfig{"key_file_is_a_device", with_models("tenants:\n  - {name: a, api_key_file: /dev/zero}\n"), 2,
                  "tenants[0].api_key_file", "larger than 4 KiB"},
        BadConfig{"salt_secret_missing", with_models("security: {salt_secret_file: /nonexistent/salt}\n"), 1,
                  "security.salt_secret_file", "/nonexistent/salt: cannot be opened"},
        BadConfig{"upstream_key_both",
                  "models:\n  - name: m\n    workers:\n      - {id: a, url: 'http://a:1', upstream_api_key_env: A, "
                  "upstream_api_key_file: /b}\n",
                  4, "models[0].workers[0]", "not both"},
        BadConfig{"key_source_place", with_models("sessions:\n  key_from: [cookie:sid]\n"), 2, "sessions.key_from[0]",
                  "not header:NAME or body:NAME"},
        BadConfig{"key_source_header_name", with_models("sessions:\n  key_from: ['header:x session']\n"), 2,
                  "sessions.key_from[0]", "not an HTTP header name"},
        BadConfig{"key_source_empty_name", with_models("sessions:\n  key_from: ['body:']\n"), 2, "sessions.key_from[0]",
                  "1 to 128 characters"},
        BadConfig{"key_source_twice", with_models("sessions:\n  key_from: [header:X-A, header:x-a]\n"), 2,
                  "sessions.key_from[1]", "listed twice"},
        BadConfig{"key_sources_too_many",
                  with_models("sessions:\n  key_from: [body:a, body:b, body:c, body:d, body:e, body:f, body:g, body:h, "
                              "body:i, body:j, body:k, body:l, body:m, body:n, body:o, body:p, body:q]\n"),
                  2, "sessions.key_from", "at most 16"},
        BadConfig{"adapter_empty",
                  "models:\n  - name: m\n    adapters: [a, '']\n    workers: [{id: w, url: 'http://a:1'}]\n", 3,
                  "models[0].adapters[1]", "must not be empty"},
        BadConfig{"adapter_twice",
                  "models:\n  - name: m\n    adapters: [a, a]\n    workers: [{id: w, url: 'http://a:1'}]\n", 3,
                  "models[0].adapters[1]", "duplicate adapter"},
        BadConfig{"adapter_named_as_a_model",
                  "models:\n  - name: m\n    workers: [{id: w, url: 'http://a:1'}]\n  - name: n\n    adapters: [m]\n"
                  "    workers: [{id: v, url: 'http://b:1'}]\n",
                  5, "models[1].adapters[0]", "name of another model or adapter"},
        BadConfig{"attention_both",
                  "models:\n  - name: m\n    attention: {sliding_window: 128, chunked_local: 8192}\n"
                  "    workers: [{id: w, url: 'http://a:1'}]\n",
                  3, "models[0].attention", "not both"},
        BadConfig{
            "attention_window_too_small",
            "models:\n  - name: m\n    attention: {sliding_window: 1}\n    workers: [{id: w, url: 'http://a:1'}]\n", 3,
            "models[0].attention.sliding_window", ""},
        BadConfig{"attention_unknown_kind",
                  "models:\n  - name: m\n    attention: {linear: 64}\n    workers: [{id: w, url: 'http://a:1'}]\n", 3,
                  "models[0].attention.linear", ""},
        BadConfig{"yaml_syntax", "models: [\n", 2, "", "YAML syntax error"},
        BadConfig{"role_unknown",
                  "models:\n  - name: m\n    disaggregation: {}\n    workers:\n"
                  "      - {id: w, url: 'http://a:1', role: encode}\n",
                  5, "models[0].workers[0].role", "unknown role 'encode'"},
        BadConfig{"roles_without_disaggregation",
                  "models:\n  - name: m\n    workers:\n      - {id: p, url: 'http://a:1', role: prefill}\n"
                  "      - {id: d, url: 'http://b:1', role: decode}\n",
                  2, "models[0].disaggregation", "need the model's disaggregation"},
        BadConfig{"decoders_without_prefill",
                  "models:\n  - name: m\n    disaggregation: {protocol: vllm}\n    workers:\n"
                  "      - {id: d, url: 'http://b:1', role: decode}\n",
                  5, "models[0].workers", "nothing can prefill"},
        BadConfig{"prefill_without_decoders",
                  "models:\n  - name: m\n    disaggregation: {protocol: sglang}\n    workers:\n"
                  "      - {id: p, url: 'http://b:1', role: prefill}\n",
                  5, "models[0].workers", "nothing can decode"},
        BadConfig{"protocol_unknown",
                  "models:\n  - name: m\n    disaggregation: {protocol: mooncake}\n    workers:\n"
                  "      - {id: d, url: 'http://b:1'}\n",
                  3, "models[0].disaggregation.protocol", "unknown protocol 'mooncake'"},
        BadConfig{"ratio_over_one",
                  "models:\n  - name: m\n    disaggregation: {local_prefill_ratio: 1.5}\n    workers:\n"
                  "      - {id: d, url: 'http://b:1'}\n",
                  3, "models[0].disaggregation.local_prefill_ratio", ""},
        BadConfig{"empty_file", "", 0, "", "empty"}),
    [](const testing::TestParamInfo<BadConfig>& info) { return std::string(info.param.name); });

TEST(ConfigLoader, ReadsADisaggregatedModel) {
  auto options = load_text(
      "models:\n  - name: m\n    disaggregation:\n      protocol: sglang\n      transfer_gbps: 50\n"
      "      local_prefill_tokens: 256\n      local_prefill_ratio: 0.8\n    workers:\n"
      "      - {id: p, url: 'http://a:1', role: prefill, bootstrap_port: 9000}\n"
      "      - {id: d, url: 'http://b:1', role: decode}\n      - {id: both, url: 'http://c:1'}\n",
      "pd.yaml");
  ASSERT_TRUE(options);
  const auto& model = options->models[0];
  ASSERT_TRUE(model.disaggregation);
  EXPECT_EQ(model.disaggregation->protocol, DisaggregationProtocol::sglang);
  EXPECT_EQ(model.disaggregation->transfer_gbps, 50);
  EXPECT_EQ(model.disaggregation->local_prefill_tokens, 256u);
  EXPECT_EQ(model.disaggregation->local_prefill_ratio, 0.8);
  EXPECT_EQ(model.workers[0].role, WorkerRole::prefill);
  EXPECT_EQ(model.workers[0].bootstrap_port, 9000);
  EXPECT_EQ(model.workers[1].role, WorkerRole::decode);
  EXPECT_EQ(model.workers[1].bootstrap_port, 8998);  // SGLang's default
  EXPECT_EQ(model.workers[2].role, WorkerRole::both);
  // Without the section a model is aggregated.
  auto plain = load_text("models:\n  - name: m\n    workers: [{id: w, url: 'http://a:1'}]\n", "plain.yaml");
  ASSERT_TRUE(plain);
  EXPECT_FALSE(plain->models[0].disaggregation);
}

TEST(ConfigLoader, ReadsAModelsLocalAttention) {
  auto options = load_text(
      "models:\n  - name: gemma\n    attention:\n      sliding_window: 1024\n    workers: [{id: w, url: "
      "'http://a:1'}]\n"
      "  - name: llama4\n    attention: {chunked_local: 8192}\n    workers: [{id: v, url: 'http://b:1'}]\n"
      "  - name: qwen3\n    workers: [{id: u, url: 'http://c:1'}]\n",
      "attention.yaml");
  ASSERT_TRUE(options);
  EXPECT_EQ(options->models[0].attention, (prefix::LocalAttention{prefix::AttentionKind::sliding_window, 1024}));
  EXPECT_TRUE(options->models[0].attention_given);
  EXPECT_EQ(options->models[1].attention, (prefix::LocalAttention{prefix::AttentionKind::chunked_local, 8192}));
  EXPECT_FALSE(options->models[2].attention.hybrid());
  EXPECT_FALSE(options->models[2].attention_given);
}

// The default recognises agent clients; a configured list replaces it,
// header names in any case.
TEST(ConfigLoader, ReadsSessionKeySources) {
  auto defaults = load_text(kMinimal, "minimal.yaml");
  ASSERT_TRUE(defaults);
  std::vector<std::string> labels;
  for (const auto& source : defaults->sessions.key_from) {
    labels.push_back(source.label);
  }
  EXPECT_EQ(labels, (std::vector<std::string>{"header:x-session-id", "header:x-claude-code-session-id",
                                              "header:session-id", "header:session_id", "header:x-session-affinity",
                                              "body:prompt_cache_key", "body:user"}));
  auto configured =
      load_text(std::string("sessions:\n  key_from: [header:X-Agent-Run, body:thread]\n") + kMinimal, "keys.yaml");
  ASSERT_TRUE(configured) << configured.error().front().to_string();
  ASSERT_EQ(configured->sessions.key_from.size(), 2u);
  EXPECT_EQ(configured->sessions.key_from[0].place, SessionKeyPlace::header);
  EXPECT_EQ(configured->sessions.key_from[0].name, "x-agent-run");
  EXPECT_EQ(configured->sessions.key_from[1].label, "body:thread");
  // An empty list: no request has a session key.
  auto none = load_text(std::string("sessions:\n  key_from: []\n") + kMinimal, "none.yaml");
  ASSERT_TRUE(none);
  EXPECT_TRUE(none->sessions.key_from.empty());
}

TEST(ConfigLoader, ReadsTheHashingPolicies) {
  auto sticky = load_text(with_models("routing: {policy: session_hash}\n"), "sticky.yaml");
  ASSERT_TRUE(sticky) << sticky.error().front().to_string();
  EXPECT_EQ(sticky->routing.policy, PolicyKind::session_hash);
  auto prefix = load_text(with_models("routing: {policy: prefix_hash, prefix_hash: {prefix_blocks: 12}}\n"), "p.yaml");
  ASSERT_TRUE(prefix) << prefix.error().front().to_string();
  EXPECT_EQ(prefix->routing.policy, PolicyKind::prefix_hash);
  EXPECT_EQ(prefix->routing.prefix_hash_blocks, 12u);
}

TEST(ConfigLoader, ReadsTheIndexEventAndCostSettings) {
  auto loaded = load_text(with_models("routing:\n  policy: cache_aware\n  cache_aware: {prefill_ms_per_token: 0.05, "
                                      "prefill_ms_per_token_pair: 2e-6, prefill_base_ms: 9, learn_prefill_cost: false, "
                                      "own_prefill_weight: 2, soft_margin: 5s, queue_ms_per_request: 7.5}\n"
                                      "index: {max_entries: 5000, speculative_ttl: 1s, approximate_ttl: 2m, "
                                      "default_kv_capacity_blocks: 900}\n"
                                      "kv_events: {replay_timeout: 250ms, silence_after: 3s}\n"),
                          "costs.yaml");
  ASSERT_TRUE(loaded) << loaded.error().front().to_string();
  EXPECT_EQ(loaded->routing.policy, PolicyKind::cache_aware);
  EXPECT_DOUBLE_EQ(loaded->routing.cache_aware.prefill_ms_per_token, 0.05);
  EXPECT_DOUBLE_EQ(loaded->routing.cache_aware.prefill_ms_per_token_pair, 2e-6);
  EXPECT_DOUBLE_EQ(loaded->routing.cache_aware.prefill_base_ms, 9);
  EXPECT_FALSE(loaded->routing.cache_aware.learn_prefill_cost);
  EXPECT_EQ(loaded->routing.cache_aware.own_prefill_weight, 2.0);
  EXPECT_FALSE(Options{}.routing.cache_aware.own_prefill_weight);  // the fleet's price of work unless fixed
  EXPECT_EQ(loaded->routing.cache_aware.soft_margin, Milliseconds(5000));
  EXPECT_FALSE(Options{}.routing.cache_aware.soft_margin);  // no load bound unless asked
  EXPECT_DOUBLE_EQ(loaded->routing.cache_aware.queue_ms_per_request, 7.5);
  EXPECT_EQ(loaded->index.max_entries, 5000u);
  EXPECT_EQ(loaded->index.speculative_ttl, Milliseconds(1000));
  EXPECT_EQ(loaded->index.approximate_ttl, Milliseconds(120'000));
  EXPECT_EQ(loaded->index.default_kv_capacity_blocks, 900u);
  EXPECT_EQ(loaded->kv_events.replay_timeout, Milliseconds(250));
  EXPECT_EQ(loaded->kv_events.silence_after, Milliseconds(3000));
}

TEST(ConfigLoader, ReadsOutlierDetectionAndTheRetryBudget) {
  auto loaded = load_text(with_models("outlier_detection: {consecutive_failures: 7, base_ejection_time: 2s, "
                                      "max_ejection_time: 1m, max_ejected_percent: 30}\n"
                                      "health_check: {passive_failures: 2}\n"
                                      "upstream: {retry_budget: {ratio: 0.5, min_retries_per_second: 1}}\n"),
                          "outliers.yaml");
  ASSERT_TRUE(loaded) << loaded.error().front().to_string();
  const auto& outlier = loaded->outlier_detection;
  EXPECT_EQ(outlier.consecutive_failures, 7u);  // the new key wins over the deprecated one
  EXPECT_EQ(outlier.base_ejection_time, Milliseconds(2'000));
  EXPECT_EQ(outlier.max_ejection_time, Milliseconds(60'000));
  EXPECT_EQ(outlier.max_ejected_percent, 30u);
  EXPECT_DOUBLE_EQ(loaded->upstream.retry_budget.ratio, 0.5);
  EXPECT_DOUBLE_EQ(loaded->upstream.retry_budget.min_retries_per_second, 1);
  EXPECT_EQ(OutlierDetectionOptions{}.consecutive_failures, 5u);

  auto backwards =
      load_text(with_models("outlier_detection: {base_ejection_time: 10s, max_ejection_time: 1s}\n"), "backwards.yaml");
  ASSERT_FALSE(backwards);
  EXPECT_NE(backwards.error().front().to_string().find("outlier_detection.max_ejection_time"), std::string::npos);
}

TEST(ConfigLoader, ReadsPerWorkerScrapeSchedules) {
  auto loaded = load_text(
      "metrics_scrape: {interval: 2s, max_backoff: 1m}\nmodels:\n  - name: m\n    workers:\n"
      "      - {id: a, url: 'http://a:1', scrape_interval: 5s, scrape_timeout: 3s}\n"
      "      - {id: b, url: 'http://b:1'}\n",
      "scrape.yaml");
  ASSERT_TRUE(loaded) << loaded.error().front().to_string();
  EXPECT_EQ(loaded->metrics_scrape.interval, Milliseconds(2000));
  EXPECT_EQ(loaded->metrics_scrape.max_backoff, Milliseconds(60'000));
  const auto& workers = loaded->models[0].workers;
  EXPECT_EQ(workers[0].scrape_interval, Milliseconds(5000));
  EXPECT_EQ(workers[0].scrape_timeout, Milliseconds(3000));
  EXPECT_FALSE(workers[1].scrape_interval);  // metrics_scrape's
  EXPECT_FALSE(workers[1].scrape_timeout);
}

TEST(ConfigLoader, ReadsEnginesAndCacheModels) {
  auto loaded = load_text(
      "models:\n  - name: m\n    workers:\n"
      "      - {id: a, url: 'http://a:1', engine: llamacpp, slots: 2, cache_ram_mib: 4096}\n"
      "      - {id: b, url: 'http://b:1', cache_model: sequences, slots: 4, slot_similarity: 0.5}\n"
      "      - {id: c, url: 'http://c:1', engine: sglang}\n",
      "engines.yaml");
  ASSERT_TRUE(loaded) << loaded.error().front().to_string();
  const auto& workers = loaded->models[0].workers;
  EXPECT_EQ(workers[0].engine, EngineKind::llamacpp);
  EXPECT_EQ(workers[0].cache_model, CacheModel::sequences);  // llama.cpp's default
  EXPECT_EQ(workers[0].slots, 2u);
  EXPECT_DOUBLE_EQ(workers[0].slot_similarity, 0.1);
  EXPECT_EQ(workers[0].cache_ram_mib, 4096u);
  EXPECT_EQ(workers[1].cache_ram_mib, 0u);
  EXPECT_EQ(workers[1].engine, EngineKind::vllm);
  EXPECT_EQ(workers[1].cache_model, CacheModel::sequences);
  EXPECT_DOUBLE_EQ(workers[1].slot_similarity, 0.5);
  EXPECT_EQ(workers[2].engine, EngineKind::sglang);
  EXPECT_EQ(workers[2].cache_model, CacheModel::blocks);
  // What the file set, against what the engine will be asked for.
  EXPECT_EQ(workers[0].given, (EngineKeysGiven{true, false, true, true}));
  EXPECT_EQ(workers[1].given, (EngineKeysGiven{false, true, true, false}));
  EXPECT_EQ(workers[2].given, (EngineKeysGiven{true, false, false, false}));
}

// Without engine keys a worker's engine tells: its slots may be left to
// llama-server's /props, and slot keys wait for the engine to be known.
TEST(ConfigLoader, LeavesEngineKeysToTheEngine) {
  auto loaded = load_text(
      "models:\n  - name: m\n    workers:\n"
      "      - {id: a, url: 'http://a:1', engine: llamacpp}\n"
      "      - {id: b, url: 'http://b:1', slots: 2, cache_ram_mib: 0}\n"
      "      - {id: c, url: 'http://c:1'}\n",
      "engines.yaml");
  ASSERT_TRUE(loaded) << loaded.error().front().to_string();
  const auto& workers = loaded->models[0].workers;
  EXPECT_EQ(workers[0].slots, 0u);
  EXPECT_FALSE(workers[0].given.slots);
  EXPECT_EQ(workers[1].slots, 2u);
  EXPECT_EQ(workers[1].given, (EngineKeysGiven{false, false, true, true}));
  EXPECT_EQ(workers[2].given, EngineKeysGiven{});
}

TEST(ConfigLoader, RejectsSequencesWithoutSlotsOrWithEvents) {
  auto mistake = [](const std::string& worker) {
    auto loaded = load_text("models:\n  - name: m\n    workers:\n      - " + worker + "\n", "bad.yaml");
    return loaded ? std::string() : loaded.error().front().to_string();
  };
  EXPECT_NE(mistake("{id: a, url: 'http://a:1', engine: sglang, cache_model: sequences}").find("workers[0].slots"),
            std::string::npos);
  EXPECT_NE(mistake("{id: a, url: 'http://a:1', cache_model: sequences, slots: 2, kv_events: 'tcp://a:5557'}")
                .find("cache_model sequences is for engines without"),
            std::string::npos);
  EXPECT_NE(mistake("{id: a, url: 'http://a:1', engine: vllm, slots: 2}").find("only with cache_model: sequences"),
            std::string::npos);
  EXPECT_NE(mistake("{id: a, url: 'http://a:1', cache_model: blocks, cache_ram_mib: 64}")
                .find("only with cache_model: sequences"),
            std::string::npos);
  EXPECT_NE(mistake("{id: a, url: 'http://a:1', engine: tgi}").find("unknown engine 'tgi'"), std::string::npos);
  EXPECT_NE(mistake("{id: a, url: 'http://a:1', cache_model: pages}").find("unknown cache_model"), std::string::npos);
  // llama.cpp with blocks chosen explicitly needs no slots.
  EXPECT_EQ(mistake("{id: a, url: 'http://a:1', engine: llamacpp, cache_model: blocks}"), "");
}

// A scratch file removed when the test ends.
struct ScratchFile {
  std::string path;
  ScratchFile(const std::string& name, const std::string& contents)
      : path(testing::TempDir() + "/kvgate-loader-" + name) {
    std::ofstream(path, std::ios::binary) << contents;
  }
  ~ScratchFile() { std::remove(path.c_str()); }
};

TEST(ConfigLoader, ReadsTenantsKeysSecretsAndIsolation) {
  ScratchFile key("key", "file-key\n");
  ScratchFile salt("salt", "0123456789abcdef0123456789abcdef\n");
  ScratchFile upstream("upstream", "engine-key");
  setenv("KVGATE_TEST_TENANT_KEY", "env-key", 1);
  const auto digest = crypto::to_hex(crypto::sha256("digest-key"));
  auto loaded = load_text("security: {salt_secret_file: " + salt.path +
                              "}\n"
                              "tenants:\n"
                              "  - {name: acme, api_key_sha256: '" +
                              digest +
                              "', weight: 2, limits: {requests_per_minute: 600, prompt_tokens_per_minute: 2000000}}\n"
                              "  - {name: beta, api_key_file: " +
                              key.path +
                              "}\n"
                              "  - {name: gamma, api_key_env: KVGATE_TEST_TENANT_KEY}\n"
                              "models:\n"
                              "  - name: m\n"
                              "    cache_isolation: tenant\n"
                              "    upstream_api_key_file: " +
                              upstream.path +
                              "\n"
                              "    workers:\n"
                              "      - {id: a, url: 'http://a:1'}\n"
                              "      - {id: b, url: 'http://b:1', upstream_api_key_env: KVGATE_TEST_TENANT_KEY}\n",
                          "tenants.yaml");
  ASSERT_TRUE(loaded) << loaded.error().front().to_string();
  ASSERT_EQ(loaded->tenants.size(), 3u);
  EXPECT_EQ(loaded->tenants[0].api_key_sha256, crypto::sha256("digest-key"));
  EXPECT_EQ(loaded->tenants[0].weight, 2);
  EXPECT_EQ(loaded->tenants[0].limits.requests_per_minute, 600);
  EXPECT_EQ(loaded->tenants[0].limits.prompt_tokens_per_minute, 2e6);
  // A key file's trailing newline is not part of the key.
  EXPECT_EQ(loaded->tenants[1].api_key_sha256, crypto::sha256("file-key"));
  EXPECT_EQ(loaded->tenants[2].api_key_sha256, crypto::sha256("env-key"));
  EXPECT_EQ(loaded->tenants[2].weight, 1);
  EXPECT_EQ(loaded->security.salt_secret, "0123456789abcdef0123456789abcdef");
  EXPECT_EQ(loaded->models[0].cache_isolation, CacheIsolation::tenant);
  // The model's upstream key is every worker's unless it has its own.
  EXPECT_EQ(loaded->models[0].workers[0].upstream_api_key, "engine-key");
  EXPECT_EQ(loaded->models[0].workers[1].upstream_api_key, "env-key");
  EXPECT_TRUE(loaded->deprecations.empty());
}

TEST(ConfigLoader, ProblemsNeverQuoteASecret) {
  ScratchFile salt("short-salt", "tiny-secret");
  auto loaded = load_text(with_models("security: {salt_secret_file: " + salt.path + "}\n"), "secret.yaml");
  ASSERT_FALSE(loaded);
  for (const auto& problem : loaded.error()) {
    EXPECT_EQ(problem.to_string().find("tiny-secret"), std::string::npos) << problem.to_string();
    EXPECT_NE(problem.message.find("shorter than 16 bytes"), std::string::npos) << problem.to_string();
  }
}

TEST(ConfigLoader, ReportsEveryProblemAtOnce) {
  auto loaded = load_text(with_models("threads: x\naccess_log: maybe\ntimeouts: {body_read: soon}\n"), "many.yaml");
  ASSERT_FALSE(loaded);
  EXPECT_EQ(loaded.error().size(), 3u);
  EXPECT_EQ(loaded.error()[0].to_string(), "many.yaml:1: threads: expected a whole number, got 'x'");
}

TEST(ConfigLoader, MissingFileIsAProblemNotACrash) {
  auto loaded = load_file("/nonexistent/kvgate.yaml");
  ASSERT_FALSE(loaded);
  EXPECT_EQ(loaded.error().front().message, "/nonexistent/kvgate.yaml: cannot be opened");
}

TEST(ConfigLoader, ShippedConfigsAreValid) {
  for (const char* name : {"kvgate.example.yaml", "kvgate.container.yaml"}) {
    auto loaded = load_file(std::string(KVGATE_SOURCE_DIR "/config/") + name);
    ASSERT_TRUE(loaded) << name << ": " << loaded.error().front().to_string();
    EXPECT_FALSE(loaded->models.empty()) << name;
  }
}

}  // namespace
}  // namespace kvgate::config
