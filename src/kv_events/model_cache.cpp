#include "kvgate/kv_events/model_cache.hpp"

namespace kvgate::kv_events {

Result<CacheRegistry::Assignment, std::string> CacheRegistry::assign(const config::ModelOptions& model,
                                                                     const config::IndexOptions& options) {
  auto& entry = models_[model.name];
  if (!entry.cache || entry.cache->block_size != model.block_size) {
    entry = Entry{std::make_shared<ModelCache>(model.name, model.block_size, options.max_entries), {}, 0};
  }
  entry.cache->index.set_max_entries(options.max_entries);
  Assignment assignment{entry.cache, {}};
  for (const auto& worker : model.workers) {
    auto found = entry.slots.find(worker.id);
    if (found != entry.slots.end()) {
      assignment.slots.push_back(found->second);
      continue;
    }
    // Slots of removed workers are not reused: the ingestion thread may not
    // have dropped their entries yet.
    if (entry.next_slot >= index::kMaxWorkers) {
      return unexpected("model '" + model.name + "' has used all " + std::to_string(index::kMaxWorkers) +
                        " worker slots of its index since start-up; restart kvgate to renumber them");
    }
    entry.slots.emplace(worker.id, entry.next_slot);
    assignment.slots.push_back(entry.next_slot++);
  }
  return assignment;
}

}  // namespace kvgate::kv_events
