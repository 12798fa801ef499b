#pragma once
// What the request path tells the index writer, as an interface: the
// router hands routing-time inserts to whoever writes the indexes without
// knowing that it is a thread with ZMQ sockets (kv_events/ingestion.hpp is
// the one implementation; unit tests give their own). Every call may come
// from any I/O thread and must not wait for the writer.
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>

#include "kvgate/kv_events/model_cache.hpp"

namespace kvgate::kv_events {

class IndexWriter {
 public:
  IndexWriter() = default;
  IndexWriter(const IndexWriter&) = delete;
  IndexWriter& operator=(const IndexWriter&) = delete;
  virtual ~IndexWriter() = default;

  // The request `ticket` with these blocks was routed to `slot`: the index
  // assumes the worker holds them until its engine says otherwise.
  virtual void assume(const std::shared_ptr<ModelCache>& cache, WorkerSlot slot, std::span<const BlockHash> blocks,
                      std::uint64_t ticket) = 0;
  // The request `ticket` was not run there (an error before its first
  // token): the assumptions it created are withdrawn.
  virtual void withdraw(const std::shared_ptr<ModelCache>& cache, WorkerSlot slot, std::span<const BlockHash> blocks,
                        std::uint64_t ticket) = 0;
  // The request `ticket` routed to a worker that keeps whole prompts in
  // slots has ended there, so its slot is free again. `reported_blocks`:
  // the engine's cached tokens for it in whole blocks, when it said
  // (sequence_slots.hpp corrects its slots from them).
  virtual void finish(const std::shared_ptr<ModelCache>& cache, WorkerSlot slot, std::uint64_t ticket,
                      std::optional<std::uint32_t> reported_blocks) = 0;
  // Any thread, off the request path: waits until every insert handed over
  // before the call is in the index (false when `timeout` passed first).
  // Lets /debug/route explain with the state the next request will see.
  virtual bool settle(std::chrono::milliseconds timeout) = 0;
};

}  // namespace kvgate::kv_events
