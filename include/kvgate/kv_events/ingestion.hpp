#pragma once
// The index writer: one dedicated thread that owns every ZMQ socket (a SUB
// and, when configured, a replay DEALER per worker) and is the only thread
// that writes the prefix indexes. I/O threads hand it routing-time inserts
// through a short mutex-guarded queue and an eventfd wake-up; they never
// wait for it (lookups read the index directly, see prefix_index.hpp).
//
// Per worker it tracks the publisher's sequence numbers:
// - next in line: applied;
// - a gap: the live batches are held back, the missing ones are asked from
//   the replay socket (vLLM's protocol), applied in order, then the held
//   ones. If the replay cannot close the gap (no replay socket, buffer too
//   short, timeout) the events the worker reported are forgotten, the worker
//   is marked stale and runs in approximate mode for index.approximate_ttl;
// - lower than the last one, or anything but the next one after the
//   connection dropped: the engine restarted, its cache is empty, so its
//   entries are dropped.
// The first batch after start-up with a sequence above 0 triggers a replay
// from 0 (what the engine stored before kvgate connected), without marking
// the worker stale when it cannot be closed (missing stores only make the
// index under-report, never claim blocks that are gone).
#include <prometheus/counter.h>
#include <prometheus/registry.h>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "kvgate/config/options.hpp"
#include "kvgate/kv_events/index_writer.hpp"
#include "kvgate/kv_events/model_cache.hpp"
#include "kvgate/kv_events/worker_feed.hpp"
#include "kvgate/workers/worker_state.hpp"

namespace kvgate::kv_events {

// The index writer's own series (each worker's event series are the
// worker's: obs/worker_series.hpp). Written by the ingestion thread.
struct IndexStats {
  explicit IndexStats(prometheus::Registry& registry);
  prometheus::Counter& evictions;  // (block, worker) entries dropped to stay under index.max_entries
  // Messages on kv_events.listen that name no worker (or several): topics
  // not of the form kv@<address>@<model>, or an address no worker has.
  prometheus::Counter& unmatched_listener_messages;
};

class Ingestion final : public IndexWriter {
 public:
  Ingestion(prometheus::Registry& registry, config::IndexOptions index_options, config::KvEventOptions event_options);
  ~Ingestion();  // stops and joins the thread
  Ingestion(const Ingestion&) = delete;
  Ingestion& operator=(const Ingestion&) = delete;

  // Control thread: the set of workers to follow (start-up and reloads).
  // Workers no longer present have their entries dropped.
  void configure(std::vector<WorkerFeed> feeds, config::IndexOptions index_options,
                 config::KvEventOptions event_options);
  // I/O threads (kv_events/index_writer.hpp says what each call means).
  void assume(const std::shared_ptr<ModelCache>& cache, WorkerSlot slot, std::span<const BlockHash> blocks,
              std::uint64_t ticket) override;
  void withdraw(const std::shared_ptr<ModelCache>& cache, WorkerSlot slot, std::span<const BlockHash> blocks,
                std::uint64_t ticket) override;
  void finish(const std::shared_ptr<ModelCache>& cache, WorkerSlot slot, std::uint64_t ticket,
              std::optional<std::uint32_t> reported_blocks) override;
  // Any thread, off the request path (kv_events/index_writer.hpp).
  bool settle(std::chrono::milliseconds timeout) override;

 private:
  struct Commands;
  class Loop;
  void wake();
  enum class Command : std::uint8_t { assume, withdraw, finish };
  void enqueue(const std::shared_ptr<ModelCache>& cache, WorkerSlot slot, std::span<const BlockHash> blocks,
               std::uint64_t ticket, Command command, std::optional<std::uint32_t> reported_blocks = std::nullopt);

  std::unique_ptr<Commands> commands_;
  std::unique_ptr<Loop> loop_;
  int wake_fd_ = -1;
  std::jthread thread_;
};

}  // namespace kvgate::kv_events
