#pragma once
// The composition root: builds every part from the options, runs them and
// shuts them down. Threads: the calling thread runs the control io_context
// (signals, reloads, health checks, admin listener); `threads` I/O threads
// each run their own io_context for the data plane.
#include <memory>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include <boost/asio/signal_set.hpp>

#include "kvgate/admin/admin_server.hpp"
#include "kvgate/config/options.hpp"
#include "kvgate/discovery/discoverer.hpp"
#include "kvgate/gateway/context.hpp"
#include "kvgate/kv_events/ingestion.hpp"
#include "kvgate/obs/exposition.hpp"
#include "kvgate/picker/endpoint_picker.hpp"
#include "kvgate/proxy/io_thread.hpp"
#include "kvgate/proxy/request_stats.hpp"
#include "kvgate/workers/health_checker.hpp"
#include "kvgate/workers/metrics_scraper.hpp"

namespace kvgate::app {

// Configuration reloads (SIGHUP), by result; both results at 0 from the start.
class ReloadStats {
 public:
  explicit ReloadStats(prometheus::Registry& registry);
  void reloaded(bool success) { (success ? success_ : failure_).Increment(); }

 private:
  prometheus::Family<prometheus::Counter>& reloads_;
  prometheus::Counter& success_;
  prometheus::Counter& failure_;
};

class Gateway {
 public:
  Gateway(std::string config_path, std::shared_ptr<const config::Options> options);
  ~Gateway();

  // Blocks until the gateway has drained after SIGTERM/SIGINT. Returns the
  // process exit code.
  int run();

 private:
  bool start();
  void wait_for_signal();
  void reload();
  // Discovered workers changed (control thread).
  void rediscovered(discovery::DiscoveredByModel discovered);
  // The file's configuration with the discovered workers added, and each
  // worker's engine keys the file left out completed from what its engine
  // said (workers/engine_identity.hpp).
  std::shared_ptr<const config::Options> effective(const config::Options& base) const;
  void add_discovered_adapters(config::Options& options) const;
  // A worker's engine said what it is, or its answers showed whether it
  // keeps a RAM prompt cache (control thread): re-model what changed.
  void engines_changed();
  // Builds and publishes a routing table for `options` (a reload, or new
  // discovered workers): workers that stay keep their state, removed ones
  // take no new requests and finish what they have. False when rejected.
  bool install(std::shared_ptr<const config::Options> options);
  void declare_series(const route::RoutingTable& table);
  bool open_decision_log(const config::Options& options);
  void begin_drain();
  void finish();

  std::string config_path_;
  std::shared_ptr<const config::Options> base_options_;  // as the file says
  std::shared_ptr<const config::Options> options_;       // with the discovered workers
  discovery::DiscoveredByModel discovered_;
  // What each worker's engine said and its answers showed, by worker id
  // (control thread).
  struct EngineFacts {
    std::optional<workers::EngineIdentity> identity;
    std::optional<bool> ram_cache;
    std::vector<std::string> adapters;  // listed in its /v1/models (models[].discover_adapters)
    bool operator==(const EngineFacts&) const = default;
  };
  std::unordered_map<std::string, EngineFacts> engines_;
  http::asio::io_context control_{1};
  obs::Exposition exposition_;
  ReloadStats reloads_{exposition_.registry()};
  proxy::RequestStats request_stats_{exposition_.registry()};
  gateway::GatewayContext context_{exposition_};
  proxy::AdmissionGate admission_{exposition_.registry()};
  kv_events::CacheRegistry registry_;
  std::unique_ptr<kv_events::Ingestion> ingestion_;              // outlives the I/O threads that feed it
  cluster::ClusterStats cluster_stats_{exposition_.registry()};  // declared alone too (dashboards)
  std::unique_ptr<cluster::Cluster> cluster_;  // when cluster: is set; stopped after the I/O threads, before ingestion_
  workers::HealthChecker health_{control_};
  workers::MetricsScraper scraper_{control_};
  admin::AdminServer admin_{control_, context_};
  http::asio::signal_set signals_{control_};
  http::asio::steady_timer grace_timer_{control_};
  std::vector<std::unique_ptr<proxy::IoThread>> threads_;
  std::unique_ptr<picker::EndpointPicker> picker_;  // when epp_listen is set
  HostPort epp_bound_;                              // its address, the port as bound
  std::vector<std::jthread> runners_;               // after threads_: joined before the threads' state is destroyed
  discovery::Discoverer discoverer_{exposition_.registry()};  // last: its thread stops before anything it posts to goes
  bool finished_ = false;
};

// Applies the level name to every kvgate logger.
void set_log_level(const std::string& level);
void setup_logging(const std::string& level);

}  // namespace kvgate::app
