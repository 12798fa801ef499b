#include "kvgate/proxy/routing_table.hpp"

#include "kvgate/openai/request.hpp"

namespace kvgate::proxy {

const ModelRoute* RoutingTable::find_model(std::string_view name) const {
  for (const auto& model : models) {
    if (model.name == name) {
      return &model;
    }
  }
  return nullptr;
}

std::vector<std::shared_ptr<workers::WorkerState>> RoutingTable::all_workers() const {
  std::vector<std::shared_ptr<workers::WorkerState>> result;
  for (const auto& model : models) {
    result.insert(result.end(), model.workers.begin(), model.workers.end());
  }
  return result;
}

std::unique_ptr<policy::Policy> make_policy(config::PolicyKind kind) {
  switch (kind) {
    case config::PolicyKind::round_robin:
      return policy::make_round_robin();
    case config::PolicyKind::least_load:
      return policy::make_least_load();
  }
  return policy::make_least_load();
}

std::shared_ptr<const RoutingTable> build_routing_table(std::shared_ptr<const config::Options> options,
                                                        const RoutingTable* previous, long created_unix_seconds) {
  auto table = std::make_shared<RoutingTable>();
  table->options = options;
  table->policy = make_policy(options->routing.policy);
  const auto& health = options->health_check;
  // Without active checks nothing would ever mark a worker up again, so
  // passive marking is off too.
  table->thresholds = {health.unhealthy_threshold, health.healthy_threshold,
                       health.enabled ? health.passive_failures : 0};
  std::vector<std::shared_ptr<workers::WorkerState>> old_workers;
  if (previous != nullptr) {
    old_workers = previous->all_workers();
  }
  std::vector<std::string> names;
  for (const auto& model_options : options->models) {
    ModelRoute model{model_options.name, model_options.block_size, {}};
    for (const auto& worker : model_options.workers) {
      std::shared_ptr<workers::WorkerState> state;
      for (const auto& old : old_workers) {
        if (old->id() == worker.id && old->url() == worker.url) {
          state = old;
        }
      }
      if (!state) {
        state = std::make_shared<workers::WorkerState>(worker.id, worker.url, worker.endpoint);
      }
      model.workers.push_back(std::move(state));
    }
    names.push_back(model.name);
    table->models.push_back(std::move(model));
  }
  table->models_body = openai::models_list(names, created_unix_seconds);
  return table;
}

}  // namespace kvgate::proxy
