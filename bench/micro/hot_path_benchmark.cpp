// Google Benchmark for the pure parts of the request path: body inspection,
// the routing decision and error rendering. Run:
//   build/bench/micro/kvgate-micro-bench --benchmark_min_time=1
#include <benchmark/benchmark.h>

#include <unistd.h>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <new>
#include <string>
#include <thread>
#include <vector>

#include "../support/resident_memory.hpp"
#include "kv_event_encoder.hpp"
#include "kvgate/cluster/message.hpp"
#include "kvgate/cluster/outbox.hpp"
#include "kvgate/index/prefix_index.hpp"
#include "kvgate/kv_events/decoder.hpp"
#include "kvgate/kv_events/worker_caches.hpp"
#include "kvgate/obs/exposition.hpp"
#include "kvgate/openai/errors.hpp"
#include "kvgate/openai/request.hpp"
#include "kvgate/policy/policy.hpp"
#include "kvgate/route/router.hpp"

// Heap allocations made by this process, counted so that benchmarks can
// report allocations per operation (the routing decision must make exactly
// one: its candidate list).
namespace {
std::atomic<std::uint64_t> g_allocations{0};
}  // namespace

void* operator new(std::size_t size) {
  g_allocations.fetch_add(1, std::memory_order_relaxed);
  if (void* memory = std::malloc(size == 0 ? 1 : size)) {
    return memory;
  }
  throw std::bad_alloc();
}
void operator delete(void* memory) noexcept {
  std::free(memory);
}
void operator delete(void* memory, std::size_t) noexcept {
  std::free(memory);
}

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
    auto summary = kvgate::openai::inspect_request(body, kvgate::openai::Endpoint::chat_completions, {});
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
std::unique_ptr<kvgate::policy::Policy> make_default_cache_aware() {
  return kvgate::policy::make_cache_aware({});
}
BENCHMARK(decide<kvgate::policy::make_round_robin>)->Arg(4)->Arg(16)->Arg(64);
// The policy alone over 1,000 workers (a model's prefix index holds 64).
BENCHMARK(decide<make_default_cache_aware>)->Arg(16)->Arg(64)->Arg(1000);
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

// A 32k-token prompt (2,048 blocks of 16) against Arg(0) workers that hold
// leading runs of it of different lengths (worker w holds the first
// 128 * (w mod 16 + 1) blocks): the lookup walks all 2,048 blocks, and at
// 1,000 workers every one of the 16 mask words stays open to the end. The
// match is reused, as the router's per-thread scratch reuses it.
void index_lookup(benchmark::State& state) {
  const auto workers = static_cast<kvgate::index::WorkerSlot>(state.range(0));
  kvgate::index::PrefixIndex index(1u << 30);
  std::vector<kvgate::prefix::BlockHash> prompt(2048);
  for (std::size_t block = 0; block < prompt.size(); ++block) {
    prompt[block] = 0x9e3779b97f4a7c15ULL * (block + 1);
  }
  for (kvgate::index::WorkerSlot worker = 0; worker < workers; ++worker) {
    auto held = std::min<std::size_t>(prompt.size(), 128 * (worker % 16 + 1u));
    index.insert(worker, std::span(prompt).first(held), kvgate::index::Tier::gpu, worker);
  }
  kvgate::index::PrefixMatch match;
  for (auto _ : state) {
    index.longest_prefix(prompt, match);
    benchmark::DoNotOptimize(match);
  }
}
BENCHMARK(index_lookup)->Arg(16)->Arg(1000)->Unit(benchmark::kMicrosecond);

// Router::decide after tokenisation, as a request gets it: a 32,768-token
// prompt (2,048 blocks) looked up in the model's index where worker w holds
// its first 128 * (w mod 16 + 1) blocks (so the lookup walks the whole prompt),
// live worker state, the session table holding 100,000 sessions and this
// request's own, and the cache_aware policy. Reports the p99 of single
// decisions and the heap allocations per decision. The second argument: the
// model's LoRA adapters (the request names one; each worker has routed a
// few of them), 0 for a base-model request. The third: a sliding window in
// tokens (0: full attention only), as Gemma 3's (1024): each worker's local
// group holds the window before the end of its run, as after its last
// request, so the check walks one window per worker. The fourth: 1 for a
// disaggregated model (every other worker a prefill worker, the rest
// decoders): the decoder pick, then where the prefill runs.
void router_decide(benchmark::State& state) {
  namespace route = kvgate::route;
  const auto workers = static_cast<std::size_t>(state.range(0));
  const auto adapters = static_cast<std::size_t>(state.range(1));
  const auto window = static_cast<std::uint32_t>(state.range(2));
  const bool disaggregated = state.range(3) != 0;
  route::RoutingTable table;
  table.options = std::make_shared<kvgate::config::Options>();
  table.policy = kvgate::policy::make_cache_aware({});
  route::ModelRoute model;
  model.name = "qwen3";
  model.cache = std::make_shared<kvgate::kv_events::ModelCache>("qwen3", 16, 1u << 26);
  if (window > 0) {
    model.cache->attention.configure({kvgate::prefix::AttentionKind::sliding_window, window});
  }
  kvgate::prompt::PreparedPrompt prompt;
  prompt.input_tokens = 32'768;
  prompt.blocks.resize(2'048);
  for (std::size_t block = 0; block < prompt.blocks.size(); ++block) {
    prompt.blocks[block] = 0x9e3779b97f4a7c15ULL * (block + 1);
  }
  for (std::size_t index = 0; index < workers; ++index) {
    auto id = "worker-" + std::to_string(index);
    model.workers.push_back(
        {std::make_shared<kvgate::workers::WorkerState>(id, "http://127.0.0.1:1", kvgate::HttpUrl{}),
         static_cast<kvgate::index::WorkerSlot>(index),
         {}});
    auto held = std::min<std::size_t>(prompt.blocks.size(), 128 * (index % 16 + 1));
    model.cache->index.insert(static_cast<kvgate::index::WorkerSlot>(index), std::span(prompt.blocks).first(held),
                              kvgate::index::Tier::gpu, 1);
    if (window > 0) {
      // The local group computed every block of the run and the pool has
      // reused those the window passed long ago: it keeps the last
      // window and a few blocks more.
      const std::size_t window_blocks = (window + 15) / 16 + 4;
      std::vector<kvgate::index::BlockHash> local;
      for (auto block = held - std::min(held, window_blocks); block < held; ++block) {
        local.push_back(kvgate::prefix::local_group_key(prompt.blocks[block]));
      }
      model.cache->index.insert(static_cast<kvgate::index::WorkerSlot>(index), local, kvgate::index::Tier::gpu, 1);
    }
    model.workers.back().state->load().prefill_added(1'000 * (index % 5));
    if (disaggregated) {
      model.workers.back().options.role =
          index % 2 == 0 ? kvgate::config::WorkerRole::prefill : kvgate::config::WorkerRole::decode;
    }
    for (std::size_t adapter = index % 4; adapter < adapters; adapter += 4) {
      model.workers.back().state->adapters().routed(adapter, 1'000 + adapter);
    }
  }
  for (std::size_t adapter = 0; adapter < adapters; ++adapter) {
    model.adapters.push_back("adapter-" + std::to_string(adapter));
    model.adapter_hashes.push_back(kvgate::workers::adapter_hash(model.adapters.back()));
  }
  model.max_loras = 4;
  if (disaggregated) {
    model.disaggregation =
        route::ModelRoute::Disaggregation{kvgate::config::DisaggregationProtocol::vllm, 512, 0.7, 131'072 / 25e6};
  }
  if (adapters > 0) {
    prompt.adapter = adapters / 2;
  }
  route::SessionTable sessions({200'000, 3'600'000, 8});
  kvgate::obs::Exposition metrics;
  route::SessionStats session_stats(metrics.registry());
  route::Router router(sessions, session_stats);
  for (int session = 0; session < 100'000; ++session) {
    route::SessionTurn turn;
    turn.worker = "worker-" + std::to_string(session % workers);
    turn.worker_position = static_cast<std::uint32_t>(session % workers);  // as Router::commit records it
    sessions.commit_turn("session-" + std::to_string(session), turn, 1'000);
  }
  std::vector<double> nanoseconds;
  nanoseconds.reserve(1 << 20);
  std::uint64_t sequence = 0;
  std::uint64_t allocations = 0;
  for (auto _ : state) {
    const auto before = g_allocations.load(std::memory_order_relaxed);
    const auto start = std::chrono::steady_clock::now();
    auto decision = router.decide(table, model, &prompt, {"session-4242", sequence++, {}, 2'000});
    const auto elapsed = std::chrono::steady_clock::now() - start;
    allocations += g_allocations.load(std::memory_order_relaxed) - before;
    benchmark::DoNotOptimize(decision);
    if (nanoseconds.size() < nanoseconds.capacity()) {
      nanoseconds.push_back(static_cast<double>(std::chrono::duration_cast<std::chrono::nanoseconds>(elapsed).count()));
    }
  }
  std::sort(nanoseconds.begin(), nanoseconds.end());
  if (!nanoseconds.empty()) {
    state.counters["p50_us"] = nanoseconds[nanoseconds.size() / 2] / 1000;
    state.counters["p90_us"] = nanoseconds[nanoseconds.size() * 9 / 10] / 1000;
    state.counters["p99_us"] = nanoseconds[nanoseconds.size() * 99 / 100] / 1000;
    state.counters["p95_us"] = nanoseconds[nanoseconds.size() * 95 / 100] / 1000;
    state.counters["p98_us"] = nanoseconds[nanoseconds.size() * 98 / 100] / 1000;
  }
  state.counters["allocs_per_decision"] =
      static_cast<double>(allocations) / static_cast<double>(std::max<std::int64_t>(state.iterations(), 1));
}
BENCHMARK(router_decide)
    ->Args({16, 0, 0, 0})
    ->Args({16, 0, 0, 1})
    ->Args({16, 32, 0, 0})
    ->Args({16, 32, 128, 0})
    ->Args({16, 32, 1024, 0})
    ->Args({64, 0, 0, 0})
    ->Args({1000, 0, 0, 0})
    ->Unit(benchmark::kMicrosecond);

// Resident memory per (block, worker) entry with 10 million entries, each
// block held by Arg(0) of 16 workers (1: 10 M blocks, the worst case for
// memory per entry; 2: 5 M blocks).
void index_memory(benchmark::State& state) {
  const auto holders = static_cast<std::uint64_t>(state.range(0));
  for (auto _ : state) {
    auto before = kvgate::bench::resident_bytes();
    kvgate::index::PrefixIndex index(1u << 30);
    std::vector<kvgate::prefix::BlockHash> run(1000);
    for (std::uint64_t chunk = 0; chunk < 10'000 / holders; ++chunk) {
      for (std::size_t block = 0; block < run.size(); ++block) {
        run[block] = 0x9e3779b97f4a7c15ULL * (chunk * 1000 + block + 1);
      }
      for (std::uint64_t holder = 0; holder < holders; ++holder) {
        auto worker = static_cast<kvgate::index::WorkerSlot>((chunk + holder) % 16);
        index.insert(worker, run, kvgate::index::Tier::gpu, static_cast<std::uint32_t>(chunk));
      }
    }
    auto after = kvgate::bench::resident_bytes();
    state.counters["entries"] = static_cast<double>(index.entries());
    state.counters["slots"] = static_cast<double>(index.capacity_slots());
    state.counters["bytes_per_entry"] = static_cast<double>(after - before) / static_cast<double>(index.entries());
    state.counters["resident_MiB"] = static_cast<double>(after - before) / (1024.0 * 1024.0);
  }
}
BENCHMARK(index_memory)->Arg(1)->Arg(2)->Iterations(1)->Unit(benchmark::kMillisecond);

// Decodes and applies one payload per iteration, round robin, as the
// ingestion thread does for one worker; counts stored blocks per second.
// Returns the engine blocks the worker holds at the end.
std::uint64_t decode_and_apply_all(benchmark::State& state, const std::vector<std::string>& payloads,
                                   std::uint32_t block_size) {
  kvgate::index::PrefixIndex index(1u << 30);
  kvgate::kv_events::AttentionLayout attention;
  kvgate::kv_events::WorkerCaches caches(index, "model", {block_size}, attention);
  std::size_t next = 0;
  std::uint64_t blocks = 0;
  for (auto _ : state) {
    auto batch = kvgate::kv_events::decode_batch(payloads[next]);
    auto stats = caches.apply(0, *batch, next);
    blocks += stats.stored_blocks;
    next = (next + 1) % payloads.size();
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(blocks));
  return caches.engine_blocks(0);
}

// Decode + apply: vLLM-style batches (map form) of 16 BlockStored events of
// 16 blocks of 16 tokens each, every event chained to the previous one, as
// the ingestion thread applies them (decode, kvgate hashes, engine-hash
// map, index insert). Throughput in stored blocks per second.
void decode_and_apply(benchmark::State& state) {
  constexpr std::uint32_t kBlockSize = 16;
  constexpr std::size_t kBatches = 2048;
  std::vector<std::string> payloads;
  std::uint64_t engine_hash = 1;
  std::uint32_t token = 0;
  for (std::size_t batch = 0; batch < kBatches; ++batch) {
    std::vector<kvgate::sim::CacheEvent> events;
    for (int event = 0; event < 16; ++event) {
      kvgate::sim::BlockStored stored;
      for (int block = 0; block < 16; ++block) {
        stored.block_hashes.push_back(0x9e3779b97f4a7c15ULL * engine_hash++);
        for (std::uint32_t position = 0; position < kBlockSize; ++position) {
          stored.token_ids.push_back(1000 + (token++ % 100'000));
        }
      }
      stored.parent_block_hash =
          event == 0 ? std::nullopt : std::optional<std::uint64_t>(0x9e3779b97f4a7c15ULL * (engine_hash - 17));
      stored.block_size = kBlockSize;
      events.emplace_back(std::move(stored));
    }
    payloads.push_back(kvgate::sim::encode_event_batch(events, 1.0, std::nullopt, kvgate::sim::EventFormat::map));
  }
  decode_and_apply_all(state, payloads, kBlockSize);
}
BENCHMARK(decode_and_apply);

// Decode + apply at steady state of a full engine: every batch stores 256
// new blocks (16 events of 16, chained) and evicts the 256 stored 64 batches
// earlier, so the maps and the index keep their size while their contents
// turn over. Throughput in stored blocks per second (removals come free).
void decode_and_apply_churn(benchmark::State& state) {
  constexpr std::uint32_t kBlockSize = 16;
  constexpr std::size_t kBatches = 2048;
  constexpr std::size_t kResidentBatches = 64;
  constexpr std::size_t kBlocksPerBatch = 256;
  auto engine_hash = [](std::size_t batch, std::size_t block) {
    return 0x9e3779b97f4a7c15ULL * (batch * kBlocksPerBatch + block + 1);
  };
  std::vector<std::string> payloads;
  std::uint32_t token = 0;
  for (std::size_t batch = 0; batch < kBatches; ++batch) {
    std::vector<kvgate::sim::CacheEvent> events;
    kvgate::sim::BlockRemoved removed;
    const auto evicted = (batch + kBatches - kResidentBatches) % kBatches;
    for (std::size_t block = 0; block < kBlocksPerBatch; ++block) {
      removed.block_hashes.push_back(engine_hash(evicted, block));
    }
    events.emplace_back(std::move(removed));
    for (std::size_t event = 0; event < 16; ++event) {
      kvgate::sim::BlockStored stored;
      for (std::size_t block = event * 16; block < event * 16 + 16; ++block) {
        stored.block_hashes.push_back(engine_hash(batch, block));
        for (std::uint32_t position = 0; position < kBlockSize; ++position) {
          stored.token_ids.push_back(1000 + (token++ % 100'000));
        }
      }
      if (event > 0) {
        stored.parent_block_hash = engine_hash(batch, event * 16 - 1);
      }
      stored.block_size = kBlockSize;
      events.emplace_back(std::move(stored));
    }
    payloads.push_back(kvgate::sim::encode_event_batch(events, 1.0, std::nullopt, kvgate::sim::EventFormat::map));
  }
  state.counters["engine_blocks"] = static_cast<double>(decode_and_apply_all(state, payloads, kBlockSize));
}
BENCHMARK(decode_and_apply_churn);

// What a cluster replica's request path adds (cluster/cluster.hpp): per
// routed request a turn, a routing-time insert of its 2,048 blocks, the
// outcome and its cost sample, each encoded into one of the outbox's reused buffers under its
// lock, while a publisher thread takes and gives them back as the real one
// does after its XADDs. Reports the p99 of one request's four messages
// and the heap allocations per request (the outbox's buffers are warm
// after their first use).
void cluster_publish(benchmark::State& state) {
  namespace cluster = kvgate::cluster;
  cluster::Outbox outbox(4'096);
  std::atomic<bool> done{false};
  std::atomic<bool> warm{false};
  std::thread publisher([&] {
    while (!warm.load()) {
      std::this_thread::yield();
    }
    std::vector<std::uint32_t> slots;
    slots.reserve(4'096);
    while (!done.load()) {
      outbox.take(slots, std::chrono::milliseconds(5));
      outbox.give_back(slots);
    }
  });
  std::vector<std::uint64_t> blocks(2'048);
  for (std::size_t block = 0; block < blocks.size(); ++block) {
    blocks[block] = 0x9e3779b97f4a7c15ULL * (block + 1);
  }
  const cluster::TurnMessage turn{"qwen3",
                                  "session-4242",
                                  "header:x-session-id",
                                  7,
                                  "worker-3",
                                  "",
                                  kvgate::policy::Reason::sticky,
                                  std::nullopt,
                                  32'768,
                                  30'720,
                                  0.4,
                                  false};
  const cluster::OutcomeMessage outcome{"qwen3", "session-4242", 7, 200, 30'720, 32'768, 41.5, 900.0};
  const cluster::LearnedMessage learned{
      "qwen3", "worker-3", {62.5, 20.0, 0.0, true, 0, 0, 12'000, 64'000, 30'720, 0, 41.5, 900.0, 32'768u, 30'720u}};
  auto publish = [&] {
    std::uint64_t now = 1'796'000'000'000;
    outbox.push([&](std::string& out) {
      cluster::encode_header(out, cluster::MessageKind::assumed, now, "gw-1", 7);
      cluster::encode_blocks(out, "qwen3", "worker-3", 42, blocks.data(), blocks.size());
    });
    outbox.push([&](std::string& out) {
      cluster::encode_header(out, cluster::MessageKind::turn, now, "gw-1", 7);
      cluster::encode(out, turn);
    });
    outbox.push([&](std::string& out) {
      cluster::encode_header(out, cluster::MessageKind::learned, now, "gw-1", 7);
      cluster::encode(out, learned);
    });
    outbox.push([&](std::string& out) {
      cluster::encode_header(out, cluster::MessageKind::outcome, now, "gw-1", 7);
      cluster::encode(out, outcome);
    });
  };
  // Warm: every buffer has held a long prompt's insert once (the queue's
  // steady state after a burst; a buffer keeps its capacity).
  for (std::size_t round = 0; round < 4'096; ++round) {
    std::uint64_t now = 1'796'000'000'000;
    outbox.push([&](std::string& out) {
      cluster::encode_header(out, cluster::MessageKind::assumed, now, "gw-1", 7);
      cluster::encode_blocks(out, "qwen3", "worker-3", 42, blocks.data(), blocks.size());
    });
  }
  {
    std::vector<std::uint32_t> slots;
    slots.reserve(4'096);
    outbox.take(slots, std::chrono::milliseconds(0));
    outbox.give_back(slots);
  }
  warm = true;
  std::vector<double> nanoseconds;
  nanoseconds.reserve(1 << 20);
  std::uint64_t allocations = 0;
  for (auto _ : state) {
    const auto before = g_allocations.load(std::memory_order_relaxed);
    const auto start = std::chrono::steady_clock::now();
    publish();
    const auto elapsed = std::chrono::steady_clock::now() - start;
    allocations += g_allocations.load(std::memory_order_relaxed) - before;
    if (nanoseconds.size() < nanoseconds.capacity()) {
      nanoseconds.push_back(static_cast<double>(std::chrono::duration_cast<std::chrono::nanoseconds>(elapsed).count()));
    }
  }
  done = true;
  publisher.join();
  std::sort(nanoseconds.begin(), nanoseconds.end());
  if (!nanoseconds.empty()) {
    state.counters["p50_us"] = nanoseconds[nanoseconds.size() / 2] / 1000;
    state.counters["p99_us"] = nanoseconds[nanoseconds.size() * 99 / 100] / 1000;
  }
  state.counters["allocs_per_request"] =
      static_cast<double>(allocations) / static_cast<double>(std::max<std::int64_t>(state.iterations(), 1));
}
BENCHMARK(cluster_publish)->Unit(benchmark::kMicrosecond);

}  // namespace

BENCHMARK_MAIN();
