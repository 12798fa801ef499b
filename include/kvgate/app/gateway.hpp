#pragma once
// The composition root: builds every part from the options, runs them and
// shuts them down. Threads: the calling thread runs the control io_context
// (signals, reloads, health checks, admin listener); `threads` I/O threads
// each run their own io_context for the data plane.
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <boost/asio/signal_set.hpp>

#include "kvgate/admin/admin_server.hpp"
#include "kvgate/config/options.hpp"
#include "kvgate/obs/metrics.hpp"
#include "kvgate/proxy/gateway_context.hpp"
#include "kvgate/proxy/io_thread.hpp"
#include "kvgate/workers/health_checker.hpp"
#include "kvgate/workers/metrics_scraper.hpp"

namespace kvgate::app {

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
  bool open_decision_log(const config::Options& options);
  void begin_drain();
  void finish();

  std::string config_path_;
  std::shared_ptr<const config::Options> options_;
  http::asio::io_context control_{1};
  obs::Metrics metrics_;
  proxy::GatewayContext context_{metrics_};
  kv_events::CacheRegistry registry_;
  std::unique_ptr<kv_events::Ingestion> ingestion_;  // outlives the I/O threads that feed it
  workers::HealthChecker health_{control_, metrics_};
  workers::MetricsScraper scraper_{control_, metrics_};
  admin::AdminServer admin_{control_, context_};
  http::asio::signal_set signals_{control_};
  http::asio::steady_timer grace_timer_{control_};
  std::vector<std::unique_ptr<proxy::IoThread>> threads_;
  std::vector<std::jthread> runners_;  // after threads_: joined before the threads' state is destroyed
  bool finished_ = false;
};

// Applies the level name to every kvgate logger.
void set_log_level(const std::string& level);
void setup_logging(const std::string& level);

}  // namespace kvgate::app
