#pragma once
// The shell around discovered_workers.hpp: resolves each model's DNS name
// every interval (libresolv, so the pod's resolv.conf and search domains
// apply, or a configured nameserver), re-reads its workers file when the
// file changes (polled each second), and reports the whole result whenever
// it changes. A source that fails (DNS timeout or SERVFAIL, an unreadable
// or invalid file) keeps its last good list: a blip must not empty a fleet.
// A name that does not exist or has no addresses is an empty list.
//
// Threading: one thread of its own (resolving blocks). `on_change` runs on
// it; the gateway posts the result to its control thread. `watch`, `stop`
// and `discover_now` are called from the control thread.
#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/registry.h>

#include <condition_variable>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "kvgate/core/result.hpp"
#include "kvgate/discovery/discovered_workers.hpp"

namespace kvgate::discovery {

// The IPv4 and IPv6 addresses of `name`; an empty list when the name does
// not exist or has none; an error when the lookup failed (timeout,
// SERVFAIL). `nameserver`: "ip:port", or empty for the system's.
Result<std::vector<std::string>, std::string> resolve_addresses(const std::string& name, const std::string& nameserver);

// Where a model's workers come from (the label of discovery's series).
enum class SourceKind : std::uint8_t { dns, file };
std::string_view to_string(SourceKind kind);

// Discovery's series: the workers a source last returned, and its failed
// lookups or reads. Written by the discovery thread.
class DiscoveryStats {
 public:
  explicit DiscoveryStats(prometheus::Registry& registry);
  // The source's error counter at 0 (a configured source). Idempotent.
  void declare(std::string_view model, SourceKind kind);
  void found(std::string_view model, SourceKind kind, std::size_t workers);
  void failed(std::string_view model, SourceKind kind);

 private:
  prometheus::Family<prometheus::Gauge>& workers_;
  prometheus::Family<prometheus::Counter>& errors_;
};

class Discoverer {
 public:
  using OnChange = std::function<void(const DiscoveredByModel&)>;

  explicit Discoverer(prometheus::Registry& registry) : stats_(registry) {}
  ~Discoverer();
  Discoverer(const Discoverer&) = delete;
  Discoverer& operator=(const Discoverer&) = delete;

  // Asks every source of `base` once, blocking (start-up: the first routing
  // table then has the discovered workers).
  DiscoveredByModel discover_now(const config::Options& base);
  // Follows the sources of `base` from now on (again after a reload), and
  // starts the thread on the first call.
  void watch(const config::Options& base, OnChange on_change);
  void stop();

 private:
  struct Source {
    std::string model;
    std::optional<config::DnsDiscoveryOptions> dns;
    std::optional<config::FileDiscoveryOptions> file;
    std::chrono::steady_clock::time_point next_dns{};
    std::chrono::steady_clock::time_point next_file{};
    std::string file_signature;  // inode, size and mtime last read
  };
  static std::vector<Source> sources_of(const config::Options& base);
  void declare(const std::vector<Source>& sources);
  // One pass over the due sources; true when the result changed.
  bool poll(std::vector<Source>& sources, DiscoveredByModel& result, bool force);
  void run();

  DiscoveryStats stats_;
  std::mutex mutex_;
  std::condition_variable wake_;
  bool stopping_ = false;
  bool retarget_ = false;
  std::vector<Source> pending_sources_;  // set by watch, taken by the thread
  OnChange on_change_;
  DiscoveredByModel result_;
  std::thread thread_;
};

}  // namespace kvgate::discovery
