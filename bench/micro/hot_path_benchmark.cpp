// Google Benchmark for the pure parts of the request path: body inspection,
// the routing decision and error rendering. Run:
//   build/bench/micro/kvgate-micro-bench --benchmark_min_time=1
#include <benchmark/benchmark.h>

#include <unistd.h>
#include <fstream>
#include <string>
#include <vector>

#include "kv_event_encoder.hpp"
#include "kvgate/index/prefix_index.hpp"
#include "kvgate/kv_events/decoder.hpp"
#include "kvgate/openai/errors.hpp"
#include "kvgate/openai/request.hpp"
#include "kvgate/policy/policy.hpp"

namespace {

std::string chat_body(int turns) {
  std::string messages = R"({"role":"system","content":"You are a helpful assistant that answers briefly."})";
  for (int turn = 0; turn < turns; ++turn) {
    messages += R"(,{"role":"user","content":"Question number )" + std::to_string(turn) +
                R"( about the weather in a city far away, with some detail."})";
    messages += R"(,{"role":"assistant","content":"An answer of moderate length that repeats the question."})";
  }
  return R"({"model":"qwen3","stream":true,"stream_options":{"include_usage":true},"max_tokens":256,)"
         R"("user":"user-42","messages":[)" +
         messages + "]}";
}

void inspect_chat(benchmark::State& state) {
  auto body = chat_body(static_cast<int>(state.range(0)));
  for (auto _ : state) {
    auto summary = kvgate::openai::inspect_request(body, kvgate::openai::Endpoint::chat_completions, "");
    benchmark::DoNotOptimize(summary);
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * body.size()));
}
BENCHMARK(inspect_chat)->Arg(1)->Arg(10)->Arg(100);

template <std::unique_ptr<kvgate::policy::Policy> (*Make)()>
void decide(benchmark::State& state) {
  auto policy = Make();
  std::vector<std::string> names;
  std::vector<kvgate::policy::WorkerView> workers;
  for (int index = 0; index < state.range(0); ++index) {
    names.push_back("worker-" + std::to_string(index));
  }
  for (int index = 0; index < state.range(0); ++index) {
    workers.push_back({names[static_cast<std::size_t>(index)], index % 7 != 3, static_cast<std::uint32_t>(index % 5)});
  }
  std::uint64_t sequence = 0;
  for (auto _ : state) {
    auto decision = policy->decide({"qwen3", "session-1", sequence++, {}}, workers);
    benchmark::DoNotOptimize(decision);
  }
}
BENCHMARK(decide<kvgate::policy::make_round_robin>)->Arg(4)->Arg(16)->Arg(64);
BENCHMARK(decide<kvgate::policy::make_least_load>)->Arg(4)->Arg(16)->Arg(64);

void error_body(benchmark::State& state) {
  auto error = kvgate::openai::model_not_found("some-model");
  for (auto _ : state) {
    auto body = kvgate::openai::error_body(error);
    benchmark::DoNotOptimize(body);
  }
}
BENCHMARK(error_body);

// A vLLM batch as a busy engine publishes it: BlockStored events of 4 blocks
// of 16 tokens each.
void decode_kv_events(benchmark::State& state) {
  std::vector<kvgate::sim::CacheEvent> events;
  const auto count = static_cast<std::uint32_t>(state.range(0));
  for (std::uint32_t event = 0; event < count; ++event) {
    std::vector<kvgate::sim::BlockHash> hashes;
    std::vector<kvgate::sim::TokenId> tokens;
    for (std::uint32_t block = 0; block < 4; ++block) {
      hashes.push_back(0x9e3779b97f4a7c15ULL * (event * 4 + block + 1));
      for (std::uint32_t token = 0; token < 16; ++token) {
        tokens.push_back(1000 + (event * 64 + block * 16 + token) % 150000);
      }
    }
    events.emplace_back(kvgate::sim::BlockStored{hashes, hashes[0] ^ 1, tokens, 16});
  }
  auto payload = kvgate::sim::encode_event_batch(events, 1700000000.0, 0, kvgate::sim::EventFormat::map);
  for (auto _ : state) {
    auto batch = kvgate::kv_events::decode_batch(payload);
    benchmark::DoNotOptimize(batch);
  }
  state.counters["blocks_per_second"] =
      benchmark::Counter(static_cast<double>(state.iterations() * count * 4), benchmark::Counter::kIsRate);
}
BENCHMARK(decode_kv_events)->Arg(16)->Arg(256);

// A 32k-token prompt (2,048 blocks of 16) against 16 workers that hold
// leading runs of it of different lengths (worker w holds the first
// 128 * (w + 1) blocks): the lookup walks all 2,048 blocks.
void index_lookup(benchmark::State& state) {
  kvgate::index::PrefixIndex index(1u << 30);
  std::vector<kvgate::prefix::BlockHash> prompt(2048);
  for (std::size_t block = 0; block < prompt.size(); ++block) {
    prompt[block] = 0x9e3779b97f4a7c15ULL * (block + 1);
  }
  for (kvgate::index::WorkerSlot worker = 0; worker < 16; ++worker) {
    auto held = std::min<std::size_t>(prompt.size(), 128 * (worker + 1u));
    index.insert(worker, std::span(prompt).first(held), kvgate::index::Tier::gpu, worker);
  }
  for (auto _ : state) {
    auto match = index.longest_prefix(prompt);
    benchmark::DoNotOptimize(match);
  }
}
BENCHMARK(index_lookup);

std::size_t resident_bytes() {
  std::ifstream statm("/proc/self/statm");
  std::size_t pages = 0;
  std::size_t resident = 0;
  statm >> pages >> resident;
  return resident * static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
}

// Resident memory per (block, worker) entry with 10 million entries: 5
// million blocks, each held by 2 of 16 workers.
void index_memory(benchmark::State& state) {
  for (auto _ : state) {
    auto before = resident_bytes();
    kvgate::index::PrefixIndex index(1u << 30);
    std::vector<kvgate::prefix::BlockHash> run(1000);
    for (std::uint64_t chunk = 0; chunk < 5000; ++chunk) {
      for (std::size_t block = 0; block < run.size(); ++block) {
        run[block] = 0x9e3779b97f4a7c15ULL * (chunk * 1000 + block + 1);
      }
      auto worker = static_cast<kvgate::index::WorkerSlot>(chunk % 16);
      index.insert(worker, run, kvgate::index::Tier::gpu, chunk);
      index.insert(static_cast<kvgate::index::WorkerSlot>((worker + 1) % 16), run, kvgate::index::Tier::gpu, chunk);
    }
    auto after = resident_bytes();
    state.counters["entries"] = static_cast<double>(index.entries());
    state.counters["bytes_per_entry"] = static_cast<double>(after - before) / static_cast<double>(index.entries());
    state.counters["resident_MiB"] = static_cast<double>(after - before) / (1024.0 * 1024.0);
  }
}
BENCHMARK(index_memory)->Iterations(1)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
