#pragma once
// Workers found at run time (models[].workers_from), and the configuration
// they make together with the file's own workers. Pure: addresses and file
// contents in, worker options and a new configuration out; the shell
// (discoverer.hpp) does the resolving, the reading and the timing.
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kvgate/config/options.hpp"

namespace kvgate::discovery {

// What one model's sources last returned; nullopt: the source is not
// configured, or has not succeeded yet.
struct Discovered {
  std::optional<std::vector<config::WorkerOptions>> dns;
  std::optional<std::vector<config::WorkerOptions>> file;
  bool operator==(const Discovered&) const;
};

using DiscoveredByModel = std::map<std::string, Discovered, std::less<>>;

// "10.0.0.7:8000", "[fd00::7]:8000": the id and the URL authority of a
// discovered worker.
std::string address_with_port(std::string_view address, std::uint16_t port);

// One worker per distinct address (sorted, so the list is stable whatever
// order the DNS server answers in), with `{host}` in the event endpoints
// replaced by the address.
std::vector<config::WorkerOptions> workers_from_addresses(const config::DnsDiscoveryOptions& dns,
                                                          std::vector<std::string> addresses);

// `base` with each model's discovered workers added after its own: the
// file's, then DNS's. A discovered worker whose id or URL another worker of
// the configuration already has is left out and named in `skipped`.
config::Options with_discovered(const config::Options& base, const DiscoveredByModel& discovered,
                                std::vector<std::string>* skipped = nullptr);

}  // namespace kvgate::discovery
