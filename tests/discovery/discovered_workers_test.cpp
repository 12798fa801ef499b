#include "kvgate/discovery/discovered_workers.hpp"

#include <gtest/gtest.h>

#include "kvgate/config/loader.hpp"

namespace kvgate::discovery {
namespace {

config::DnsDiscoveryOptions dns_options() {
  config::DnsDiscoveryOptions dns;
  dns.name = "vllm-headless.default.svc.cluster.local";
  dns.port = 8000;
  dns.kv_events = "tcp://{host}:5557";
  dns.kv_events_replay = "tcp://{host}:5558";
  return dns;
}

TEST(DiscoveredWorkers, EachAddressIsAWorkerNamedByAddressAndPortInAStableOrder) {
  auto workers = workers_from_addresses(dns_options(), {"10.0.0.9", "10.0.0.7", "fd00::7", "10.0.0.9"});
  ASSERT_EQ(workers.size(), 3u);
  EXPECT_EQ(workers[0].id, "10.0.0.7:8000");
  EXPECT_EQ(workers[0].url, "http://10.0.0.7:8000");
  EXPECT_EQ(workers[0].endpoint.authority.port, 8000);
  EXPECT_EQ(workers[0].kv_events, "tcp://10.0.0.7:5557");
  EXPECT_EQ(workers[0].kv_events_replay, "tcp://10.0.0.7:5558");
  EXPECT_EQ(workers[1].id, "10.0.0.9:8000");
  EXPECT_EQ(workers[2].id, "[fd00::7]:8000");
  EXPECT_EQ(workers[2].kv_events, "tcp://[fd00::7]:5557");
  auto no_events = dns_options();
  no_events.kv_events.clear();
  no_events.kv_events_replay.clear();
  EXPECT_TRUE(workers_from_addresses(no_events, {"10.0.0.7"})[0].kv_events.empty());
  EXPECT_TRUE(workers_from_addresses(dns_options(), {}).empty());
}

// A llama.cpp fleet behind a headless Service: every address it yields
// runs the engine the source names, with the slots it names.
TEST(DiscoveredWorkers, EveryDiscoveredWorkerRunsTheEngineItsSourceNames) {
  auto loaded = config::load_text(R"(
models:
  - name: m
    workers_from:
      dns: {name: llama-headless.default.svc.cluster.local, port: 8080, engine: llamacpp, slots: 4,
            cache_ram_mib: 2048}
)",
                                  "test.yaml");
  ASSERT_TRUE(loaded) << loaded.error().front().to_string();
  const auto& dns = *loaded->models[0].workers_from.dns;
  auto workers = workers_from_addresses(dns, {"10.0.0.8", "10.0.0.7"});
  ASSERT_EQ(workers.size(), 2u);
  for (const auto& worker : workers) {
    EXPECT_EQ(worker.engine, config::EngineKind::llamacpp) << worker.id;
    EXPECT_EQ(worker.cache_model, config::CacheModel::sequences) << worker.id;  // llama.cpp's default
    EXPECT_EQ(worker.slots, 4u) << worker.id;
    EXPECT_EQ(worker.cache_ram_mib, 2048u) << worker.id;
  }
  EXPECT_EQ(workers[0].id, "10.0.0.7:8080");

  // The listed workers' rules hold for discovered ones.
  auto problem_of = [](const std::string& dns_fields) {
    auto bad = config::load_text(
        "models:\n  - name: m\n    workers_from:\n      dns: {name: x.example, port: 8080, " + dns_fields + "}\n",
        "bad.yaml");
    return bad ? std::string() : bad.error().front().to_string();
  };
  EXPECT_NE(problem_of("engine: sglang, cache_model: sequences").find("dns.slots"), std::string::npos)
      << problem_of("engine: sglang, cache_model: sequences");
  EXPECT_EQ(problem_of("engine: llamacpp"), "");  // its slots are read from each replica's /props
  EXPECT_NE(problem_of(R"(engine: llamacpp, slots: 2, kv_events: "tcp://{host}:5557")").find("KV events"),
            std::string::npos);
  EXPECT_NE(problem_of("engine: tgi").find("unknown engine"), std::string::npos);
  EXPECT_NE(problem_of("engine: vllm, slots: 2").find("only with cache_model: sequences"), std::string::npos);
}

config::Options two_models() {
  auto loaded = config::load_text(R"(
models:
  - name: a
    workers: [{id: static-a, url: "http://10.0.0.1:8000"}]
    workers_from: {file: /etc/kvgate/a.yaml}
  - name: b
    workers_from: {dns: {name: b.example, port: 8000}}
)",
                                  "test.yaml");
  EXPECT_TRUE(loaded) << loaded.error().front().to_string();
  return *loaded;
}

TEST(DiscoveredWorkers, TheConfigurationGetsTheDiscoveredWorkersAfterItsOwn) {
  const auto base = two_models();
  ASSERT_TRUE(base.models[1].workers.empty());
  DiscoveredByModel found;
  found["b"].dns = workers_from_addresses(dns_options(), {"10.0.1.2", "10.0.1.1"});
  found["a"].file = *config::load_worker_list(R"([{id: f1, url: "http://10.0.2.1:8000"}])", "a.yaml");
  std::vector<std::string> skipped;
  auto options = with_discovered(base, found, &skipped);
  EXPECT_TRUE(skipped.empty());
  ASSERT_EQ(options.models[0].workers.size(), 2u);
  EXPECT_EQ(options.models[0].workers[0].id, "static-a");
  EXPECT_EQ(options.models[0].workers[1].id, "f1");
  ASSERT_EQ(options.models[1].workers.size(), 2u);
  EXPECT_EQ(options.models[1].workers[0].id, "10.0.1.1:8000");
  // The base is untouched: a later discovery starts from the file again.
  EXPECT_EQ(base.models[0].workers.size(), 1u);
}

TEST(DiscoveredWorkers, ADiscoveredWorkerCannotTakeAConfiguredIdOrUrl) {
  const auto base = two_models();
  DiscoveredByModel found;
  found["a"].file = *config::load_worker_list(
      R"([{id: static-a, url: "http://10.0.9.9:8000"}, {id: other, url: "http://10.0.0.1:8000"},
          {id: fine, url: "http://10.0.3.3:8000"}])",
      "a.yaml");
  // The same address found by b's DNS as listed in a's file: the file's wins.
  found["b"].dns = workers_from_addresses(dns_options(), {"10.0.3.3"});
  found["b"].dns->front().url = "http://10.0.3.3:8000";
  found["b"].dns->front().id = "fine";
  std::vector<std::string> skipped;
  auto options = with_discovered(base, found, &skipped);
  ASSERT_EQ(options.models[0].workers.size(), 2u);
  EXPECT_EQ(options.models[0].workers[1].id, "fine");
  EXPECT_TRUE(options.models[1].workers.empty());
  EXPECT_EQ(skipped.size(), 3u);
}

TEST(DiscoveredWorkers, ResultsCompareByEveryFieldThatChangesRouting) {
  Discovered a;
  Discovered b;
  EXPECT_EQ(a, b);
  a.dns = workers_from_addresses(dns_options(), {"10.0.0.1"});
  EXPECT_FALSE(a == b);
  b.dns = workers_from_addresses(dns_options(), {"10.0.0.1"});
  EXPECT_EQ(a, b);
  b.dns->front().kv_capacity_blocks = 100;
  EXPECT_FALSE(a == b);
  b.dns = std::vector<config::WorkerOptions>{};
  a.dns = std::nullopt;
  EXPECT_FALSE(a == b) << "never resolved is not the same as resolved to nothing";
}

TEST(WorkerList, ReadsASequenceOrAWorkersMappingAndNamesEveryProblem) {
  auto list = config::load_worker_list(R"(
- {id: w1, url: "http://10.0.0.1:8000", kv_events: "tcp://10.0.0.1:5557"}
- {id: w2, url: "http://10.0.0.2:8000"}
)",
                                       "w.yaml");
  ASSERT_TRUE(list);
  ASSERT_EQ(list->size(), 2u);
  EXPECT_EQ((*list)[0].kv_events, "tcp://10.0.0.1:5557");
  auto json_form = config::load_worker_list(R"({"workers": [{"id": "j", "url": "http://10.0.0.3:8000"}]})", "w.json");
  ASSERT_TRUE(json_form);
  EXPECT_EQ(json_form->front().id, "j");
  EXPECT_TRUE(config::load_worker_list("", "w.yaml")->empty());
  EXPECT_TRUE(config::load_worker_list("[]", "w.yaml")->empty());

  auto bad = config::load_worker_list(R"(
- {id: w1, url: "http://10.0.0.1:8000"}
- {id: w1, url: "ftp://nope"}
- {url: "http://10.0.0.1:8000", colour: blue}
)",
                                      "w.yaml");
  ASSERT_FALSE(bad);
  std::string all;
  for (const auto& problem : bad.error()) {
    all += problem.to_string() + "\n";
  }
  EXPECT_NE(all.find("duplicate worker id 'w1'"), std::string::npos) << all;
  EXPECT_NE(all.find("invalid URL 'ftp://nope'"), std::string::npos) << all;
  EXPECT_NE(all.find("colour"), std::string::npos) << all;
  EXPECT_NE(all.find("w.yaml:4"), std::string::npos) << all;
  EXPECT_FALSE(config::load_worker_list("{not: [valid", "w.yaml"));
  EXPECT_FALSE(config::load_worker_list("just text", "w.yaml"));
}

TEST(WorkersFrom, TheLoaderChecksEverySourceKey) {
  auto bad = config::load_text(R"(
models:
  - name: m
    workers_from:
      dns: {name: "", port: 70000, interval: 1ms, kv_events: "tcp://10.0.0.1:5557", nameserver: "dns.example"}
  - name: n
    workers_from: {}
  - name: o
)",
                               "t.yaml");
  ASSERT_FALSE(bad);
  std::string all;
  for (const auto& problem : bad.error()) {
    all += problem.to_string() + "\n";
  }
  for (const char* expected :
       {"dns.name: must not be empty", "dns.port", "dns.interval", "{host}", "dns.nameserver: expected host:port",
        "expected dns: or file:", "models[2].workers: a model needs at least one worker"}) {
    EXPECT_NE(all.find(expected), std::string::npos) << expected << "\n" << all;
  }
}

}  // namespace
}  // namespace kvgate::discovery
