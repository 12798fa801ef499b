#include "kvgate/kv_events/model_cache.hpp"

namespace kvgate::kv_events {

Result<std::vector<CacheRegistry::Assignment>, std::string> CacheRegistry::assign(
    const std::vector<config::ModelOptions>& models, const config::IndexOptions& options) {
  // Staged on a copy (a few map entries and shared pointers per model):
  // nothing is visible until every model has its slots.
  auto staged = models_;
  std::vector<Assignment> assignments;
  for (const auto& model : models) {
    auto assignment = assign_model(staged[model.name], model, options);
    if (!assignment) {
      return unexpected(assignment.error());
    }
    assignments.push_back(std::move(*assignment));
  }
  models_ = std::move(staged);
  for (std::size_t model = 0; model < assignments.size(); ++model) {
    assignments[model].cache->index.set_max_entries(options.max_entries);
    assignments[model].cache->attention.configure(models[model].attention);
  }
  return assignments;
}

Result<CacheRegistry::Assignment, std::string> CacheRegistry::assign_model(Entry& entry,
                                                                           const config::ModelOptions& model,
                                                                           const config::IndexOptions& options) {
  if (!entry.cache || entry.cache->block_size != model.block_size) {
    entry = Entry{std::make_shared<ModelCache>(model.name, model.block_size, options.max_entries), {}, 0};
  }
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
