#pragma once
// One model's prefix index and its writer-side bookkeeping, and the registry
// that keeps them (and each worker's slot in them) across config reloads.
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "kvgate/config/options.hpp"
#include "kvgate/kv_events/worker_caches.hpp"

namespace kvgate::kv_events {

struct ModelCache {
  ModelCache(std::string model_name, std::uint32_t model_block_size, std::uint64_t max_entries)
      : name(std::move(model_name)),
        block_size(model_block_size),
        index(max_entries),
        caches(index, name, CacheLimits{model_block_size}, attention) {}

  const std::string name;
  const std::uint32_t block_size;
  index::PrefixIndex index;   // read by any thread, written by the ingestion thread
  AttentionLayout attention;  // configured by the control thread, reported by the ingestion thread
  WorkerCaches caches;        // ingestion thread only
};

// Control thread only (start-up and reloads). A worker keeps its slot for
// the life of the process while its id stays configured for the model, so a
// reload never credits one worker with another's blocks; a model whose block
// size changes gets a fresh index.
class CacheRegistry {
 public:
  struct Assignment {
    std::shared_ptr<ModelCache> cache;
    std::vector<WorkerSlot> slots;  // per worker, in configuration order
  };
  // One assignment per model, in order; all or nothing: when any model
  // fails (it would need more than 64 worker slots) the registry and the
  // live indexes are left exactly as they were, so a rejected reload
  // changes nothing.
  Result<std::vector<Assignment>, std::string> assign(const std::vector<config::ModelOptions>& models,
                                                      const config::IndexOptions& options);

 private:
  struct Entry {
    std::shared_ptr<ModelCache> cache;
    std::map<std::string, WorkerSlot> slots;
    WorkerSlot next_slot = 0;
  };
  static Result<Assignment, std::string> assign_model(Entry& entry, const config::ModelOptions& model,
                                                      const config::IndexOptions& options);
  std::map<std::string, Entry> models_;
};

}  // namespace kvgate::kv_events
