#pragma once
// One worker as the index writer follows it: where its events come from and
// how its cache is modelled when they do not. Built from the routing table
// by the shell that starts the writer (app), read by kv_events/ingestion.
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "kvgate/kv_events/model_cache.hpp"

namespace kvgate::workers {
class WorkerState;
}

namespace kvgate::kv_events {

// A worker's events_endpoint meaning that its engine dials out to the
// gateway's own SUB socket (kv_events.listen) rather than publishing on a
// socket of its own.
inline constexpr std::string_view kListenerEndpoint = "listen";

struct WorkerFeed {
  std::shared_ptr<workers::WorkerState> worker;
  std::shared_ptr<ModelCache> cache;
  WorkerSlot slot = 0;
  std::string events_endpoint;  // empty: approximate mode; kListenerEndpoint: the listener
  // With the listener: the topics' address fields that are this worker's
  // (llm-d's topic kv@<address>@<model>: its URL's host:port, and its host).
  std::vector<std::string> listener_addresses;
  std::string replay_endpoint;  // empty: gaps cannot be replayed
  // The worker's KV capacity in blocks, for approximate mode: the
  // configured one, else the engine's num_gpu_blocks (scraped), else the
  // default.
  std::uint64_t configured_capacity_blocks = 0;  // 0: not configured
  std::uint64_t default_capacity_blocks = 65'536;
  // A worker keeping whole prompts in this many slots (config::CacheModel::
  // sequences, kv_events/sequence_slots.hpp); 0: the blocks model.
  std::uint32_t sequence_slots = 0;
  double slot_similarity = 0.1;
  std::uint64_t slot_ram_blocks = 0;  // its host-RAM prompt cache, in blocks
  // The model's LoRA adapters (models[].adapters): blocks whose events
  // name another adapter are not indexed (no request can match them).
  std::vector<std::string> adapters;
};

}  // namespace kvgate::kv_events
