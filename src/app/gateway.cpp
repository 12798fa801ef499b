#include "kvgate/app/gateway.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <boost/asio/post.hpp>
#include <chrono>
#include <csignal>
#include <iostream>
#include <set>

#include "kvgate/app/cpus.hpp"
#include "kvgate/config/loader.hpp"
#include "kvgate/openai/errors.hpp"

namespace kvgate::app {

ReloadStats::ReloadStats(prometheus::Registry& registry)
    : reloads_(prometheus::BuildCounter()
                   .Name("kvgate_config_reloads_total")
                   .Help("Configuration reloads (SIGHUP), by result")
                   .Register(registry)),
      success_(reloads_.Add({{"result", "success"}})),
      failure_(reloads_.Add({{"result", "failure"}})) {}

using namespace kvgate::http;

namespace {

long unix_now() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

Result<tcp::endpoint, std::string> resolve_listen(const HostPort& address) {
  error_code error;
  auto ip = asio::ip::make_address(address.host == "localhost" ? "127.0.0.1" : address.host, error);
  if (error) {
    return unexpected("listen address '" + address.host + "' must be an IP address");
  }
  return tcp::endpoint(ip, address.port);
}

std::string endpoint_text(const tcp::endpoint& endpoint) {
  return HostPort{endpoint.address().to_string(), endpoint.port()}.to_string();
}

}  // namespace

Gateway::Gateway(std::string config_path, std::shared_ptr<const config::Options> options)
    : config_path_(std::move(config_path)), base_options_(options), options_(std::move(options)) {}

// models[].discover_adapters: the adapters any of the model's engines lists
// join the configured ones (in the order first seen), except a name another
// model or adapter already has.
void Gateway::add_discovered_adapters(config::Options& options) const {
  std::set<std::string> names;
  for (const auto& model : options.models) {
    names.insert(model.name);
    names.insert(model.adapters.begin(), model.adapters.end());
  }
  for (auto& model : options.models) {
    if (!model.discover_adapters) {
      continue;
    }
    for (const auto& worker : model.workers) {
      const auto found = engines_.find(worker.id);
      if (found == engines_.end()) {
        continue;
      }
      for (const auto& adapter : found->second.adapters) {
        constexpr std::size_t kMaxAdapters = 256;  // as configured ones
        if (model.adapters.size() < kMaxAdapters && names.insert(adapter).second) {
          model.adapters.push_back(adapter);
        }
      }
    }
  }
}

std::shared_ptr<const config::Options> Gateway::effective(const config::Options& base) const {
  std::vector<std::string> skipped;
  auto options = discovery::with_discovered(base, discovered_, &skipped);
  for (const auto& worker : skipped) {
    spdlog::warn("discovery: {} is left out: a configured worker has its id or URL", worker);
  }
  add_discovered_adapters(options);
  for (auto& model : options.models) {
    for (auto& worker : model.workers) {
      const auto found = engines_.find(worker.id);
      worker = found == engines_.end()
                   ? workers::resolve_engine(worker, std::nullopt, std::nullopt)
                   : workers::resolve_engine(worker, found->second.identity, found->second.ram_cache);
    }
  }
  return std::make_shared<const config::Options>(std::move(options));
}

void Gateway::engines_changed() {
  if (finished_ || context_.draining()) {
    return;
  }
  const auto table = context_.table();
  bool changed = false;
  for (const auto& model : table->models) {
    for (const auto& route : model.workers) {
      const auto& worker = *route.state;
      EngineFacts facts;
      if (auto identity = worker.engine().identity()) {
        facts.identity = *identity;
      }
      facts.ram_cache = worker.costs().ram_cache();
      facts.adapters = worker.engine().served_adapters();
      auto& known = engines_[worker.id()];
      if (known == facts) {
        continue;
      }
      if (facts.identity && !(known.identity == facts.identity)) {
        for (const auto& contradiction : workers::contradictions(route.options, *facts.identity)) {
          spdlog::warn("worker {}: {}", worker.id(), contradiction);
        }
      }
      known = std::move(facts);
      changed = true;
    }
  }
  // Workers that left the table take what their engines said with them.
  std::erase_if(engines_, [&](const auto& entry) {
    return std::none_of(table->models.begin(), table->models.end(), [&](const route::ModelRoute& model) {
      return std::any_of(model.workers.begin(), model.workers.end(),
                         [&](const route::WorkerRoute& route) { return route.state->id() == entry.first; });
    });
  });
  if (!changed) {
    return;
  }
  auto options = effective(*base_options_);
  if (*options == *options_) {
    return;
  }
  const auto before = options_;
  if (install(options)) {
    for (std::size_t model = 0;
         model < options_->models.size() && model < before->models.size() && model < base_options_->models.size();
         ++model) {
      if (options_->models[model].adapters != before->models[model].adapters) {
        spdlog::info("model {}: serving {} LoRA adapters ({} configured, the rest listed by its engines)",
                     options_->models[model].name, options_->models[model].adapters.size(),
                     base_options_->models[model].adapters.size());
      }
    }
    for (const auto& model : options_->models) {
      for (const auto& worker : model.workers) {
        spdlog::info("worker {}: engine {}, cache model {}{}", worker.id, config::to_string(worker.engine),
                     config::to_string(worker.cache_model),
                     worker.cache_model == config::CacheModel::sequences
                         ? " (" + std::to_string(worker.slots) + " slots, cache_ram_mib " +
                               std::to_string(worker.cache_ram_mib) + ")"
                         : std::string());
      }
    }
  }
}

Gateway::~Gateway() {
  finish();
}

int Gateway::run() {
  if (!start()) {
    finish();
    return 1;
  }
  control_.run();
  finish();
  spdlog::info("kvgate stopped");
  return 0;
}

bool Gateway::start() {
  if (std::any_of(base_options_->models.begin(), base_options_->models.end(),
                  [](const auto& model) { return model.workers_from.any(); })) {
    discovered_ = discoverer_.discover_now(*base_options_);
  }
  options_ = effective(*base_options_);
  scraper_.on_engine_change([this] { asio::post(control_, [this] { engines_changed(); }); });
  auto initial = route::build_routing_table(options_, nullptr, unix_now(), registry_);
  if (!initial) {
    spdlog::critical("{}", initial.error());
    return false;
  }
  declare_series(**initial);
  context_.publish(*initial);
  ingestion_ = std::make_unique<kv_events::Ingestion>(exposition_.registry(), options_->index, options_->kv_events);
  ingestion_->configure(route::worker_feeds(**initial), options_->index, options_->kv_events);
  context_.set_index_writer(ingestion_.get());
  if (options_->cluster) {
    cluster_ = std::make_unique<cluster::Cluster>(*options_->cluster, context_.tables(), context_.sessions(),
                                                  ingestion_.get(), cluster_stats_);
    context_.set_cluster(cluster_.get());
    cluster_->start();
  }
  if (!open_decision_log(*options_)) {
    return false;
  }
  auto listen = resolve_listen(options_->listen);
  auto admin_listen = resolve_listen(options_->admin_listen);
  if (!listen || !admin_listen) {
    spdlog::critical("{}", !listen ? listen.error() : admin_listen.error());
    return false;
  }
  auto thread_count = options_->threads != 0 ? options_->threads : available_cpus();
  auto bind_to = *listen;
  for (unsigned index = 0; index < thread_count; ++index) {
    auto& thread =
        threads_.emplace_back(std::make_unique<proxy::IoThread>(context_, admission_, request_stats_, *options_));
    auto bound = thread->bind(bind_to);
    if (!bound) {
      spdlog::critical("{}", bound.error());
      return false;
    }
    bind_to = *bound;  // port 0: the others join the port the kernel picked
  }
  auto admin_bound = admin_.bind(*admin_listen);
  if (!admin_bound) {
    spdlog::critical("{}", admin_bound.error());
    return false;
  }
  if (options_->epp_listen) {
    picker_ = std::make_unique<picker::EndpointPicker>(context_, admission_);
    auto port = picker_->start(*options_->epp_listen);
    if (!port) {
      spdlog::critical("{}", port.error());
      return false;
    }
    epp_bound_ = *options_->epp_listen;
    epp_bound_.port = static_cast<std::uint16_t>(*port);
  }
  context_.on_drained([this] { asio::post(control_, [this] { finish(); }); });
  for (auto& thread : threads_) {
    thread->start_accepting();
    runners_.emplace_back([&io = thread->io()] { io.run(); });
  }
  admin_.start();
  auto table = context_.table();
  health_.watch(table->all_workers(), options_->health_check, table->thresholds);
  scraper_.watch(route::scrape_targets(*table), options_->metrics_scrape);
  discoverer_.watch(*base_options_, [this](const discovery::DiscoveredByModel& discovered) {
    asio::post(control_, [this, discovered] { rediscovered(discovered); });
  });
  signals_.add(SIGTERM);
  signals_.add(SIGINT);
  signals_.add(SIGHUP);
  wait_for_signal();
  // Scripts and tests wait for this exact line before sending traffic.
  std::cout << "kvgate listening api=" << endpoint_text(bind_to) << " admin=" << endpoint_text(*admin_bound)
            << (picker_ ? " epp=" + epp_bound_.to_string() : std::string()) << std::endl;
  spdlog::info("kvgate {} serving {} model(s) with {} I/O thread(s), policy {}", KVGATE_VERSION,
               options_->models.size(), thread_count, config::to_string(options_->routing.policy));
  return true;
}

void Gateway::wait_for_signal() {
  signals_.async_wait([this](const error_code& error, int signal) {
    if (error) {
      return;
    }
    if (signal == SIGHUP) {
      reload();
    } else if (context_.draining()) {
      spdlog::warn("second stop signal: exiting without waiting for in-flight requests");
      finish();
      return;
    } else {
      begin_drain();
    }
    wait_for_signal();
  });
}

void Gateway::reload() {
  auto loaded = config::load_file(config_path_);
  if (!loaded) {
    spdlog::error("config reload rejected, keeping the running configuration:");
    for (const auto& problem : loaded.error()) {
      spdlog::error("  {}", problem.to_string());
    }
    reloads_.reloaded(false);
    return;
  }
  auto base = std::make_shared<const config::Options>(std::move(*loaded));
  for (const auto& deprecation : base->deprecations) {
    spdlog::warn("config reload: {}", deprecation);
  }
  if (!(base->listen == options_->listen) || !(base->admin_listen == options_->admin_listen) ||
      !(base->epp_listen == options_->epp_listen) || base->threads != options_->threads) {
    spdlog::warn("config reload: listen, admin_listen and threads take effect only after a restart");
  }
  if (!(base->cluster == options_->cluster)) {
    spdlog::warn("config reload: cluster takes effect only after a restart");
  }
  if (!open_decision_log(*base)) {
    reloads_.reloaded(false);
    return;
  }
  // Models and sources the new file drops take their discoveries with them.
  std::erase_if(discovered_, [&](const auto& entry) {
    return std::none_of(base->models.begin(), base->models.end(),
                        [&](const auto& model) { return model.name == entry.first && model.workers_from.any(); });
  });
  if (!install(effective(*base))) {
    reloads_.reloaded(false);
    return;
  }
  base_options_ = base;
  discoverer_.watch(*base_options_, [this](const discovery::DiscoveredByModel& discovered) {
    asio::post(control_, [this, discovered] { rediscovered(discovered); });
  });
  reloads_.reloaded(true);
  spdlog::info("config reloaded from {}: {} model(s), policy {}", config_path_, options_->models.size(),
               config::to_string(options_->routing.policy));
}

void Gateway::rediscovered(discovery::DiscoveredByModel discovered) {
  if (finished_ || context_.draining()) {
    return;
  }
  discovered_ = std::move(discovered);
  auto options = effective(*base_options_);
  std::vector<std::string> before;
  std::vector<std::string> after;
  for (const auto& model : options_->models) {
    for (const auto& worker : model.workers) {
      before.push_back(model.name + "/" + worker.id);
    }
  }
  for (const auto& model : options->models) {
    for (const auto& worker : model.workers) {
      after.push_back(model.name + "/" + worker.id);
    }
  }
  if (install(options)) {
    std::string added;
    std::string removed;
    for (const auto& worker : after) {
      if (std::find(before.begin(), before.end(), worker) == before.end()) {
        added += (added.empty() ? "" : ", ") + worker;
      }
    }
    for (const auto& worker : before) {
      if (std::find(after.begin(), after.end(), worker) == after.end()) {
        removed += (removed.empty() ? "" : ", ") + worker;
      }
    }
    spdlog::info("discovery: workers added: {}; removed (draining): {}", added.empty() ? "none" : added,
                 removed.empty() ? "none" : removed);
  }
}

// The series whose label values this configuration knows, at 0 (a worker's
// own are declared with it: obs/worker_series.hpp).
void Gateway::declare_series(const route::RoutingTable& table) {
  for (const auto& model : table.models) {
    request_stats_.declare_model(model.name, model.disaggregation.has_value());
    context_.session_stats().declare_model(model.name);
  }
  admission_.stats().declare_tenant(table.tenants->anonymous().name);
  for (const auto& tenant : table.options->tenants) {
    admission_.stats().declare_tenant(tenant.name);
  }
  for (const auto& error : openai::common_errors()) {
    request_stats_.declare_client_error(error.status, error.code);
  }
}

bool Gateway::install(std::shared_ptr<const config::Options> options) {
  auto previous = context_.table();
  auto built = route::build_routing_table(options, previous.get(), unix_now(), registry_);
  if (!built) {
    spdlog::error("new routing table rejected, keeping the running one: {}", built.error());
    return false;
  }
  const auto& table = *built;
  declare_series(*table);
  context_.publish(table);
  ingestion_->configure(route::worker_feeds(*table), options->index, options->kv_events);
  options_ = options;
  health_.watch(table->all_workers(), options->health_check, table->thresholds);
  scraper_.watch(route::scrape_targets(*table), options->metrics_scrape);
  for (auto& thread : threads_) {
    thread->apply_pool_limits(options->upstream.max_idle_connections, options->upstream.idle_connection_timeout);
  }
  set_log_level(options->log_level);
  return true;
}

// (Re)opens the decision log, so SIGHUP after a log rotation starts a new file.
bool Gateway::open_decision_log(const config::Options& options) {
  if (options.decision_log.empty()) {
    context_.publish(std::shared_ptr<obs::DecisionLog>());
    return true;
  }
  auto log = obs::DecisionLog::open(options.decision_log);
  if (!log) {
    spdlog::error("{}", log.error());
    return false;
  }
  context_.publish(std::move(*log));
  return true;
}

void Gateway::begin_drain() {
  auto grace = options_->timeouts.shutdown_grace;
  spdlog::info("draining: no new connections; waiting up to {} for {} open connection(s)", format_duration(grace),
               context_.open_connections());
  context_.start_draining();
  if (picker_) {
    picker_->start_draining();
  }
  for (auto& thread : threads_) {
    thread->stop_accepting();
    thread->close_idle_connections();
  }
  grace_timer_.expires_after(grace);
  grace_timer_.async_wait([this](const error_code& error) {
    if (!error) {
      spdlog::warn("shutdown grace period over: closing {} connection(s) still open", context_.open_connections());
      finish();
    }
  });
  if (context_.open_connections() == 0) {
    finish();
  }
}

void Gateway::finish() {
  if (finished_) {
    return;
  }
  finished_ = true;
  discoverer_.stop();
  health_.stop();
  scraper_.stop();
  admin_.stop();
  if (picker_) {
    // Its streams counted as connections: they ended, or the grace period
    // is over and they are cancelled.
    picker_->shutdown(0);
  }
  error_code ignored;
  signals_.cancel(ignored);
  grace_timer_.cancel();
  for (auto& thread : threads_) {
    thread->io().stop();
  }
  runners_.clear();  // joins
  if (cluster_) {
    cluster_->stop();
  }
  ingestion_.reset();
  control_.stop();
}

}  // namespace kvgate::app
