#include "kvgate/discovery/discovered_workers.hpp"

#include <algorithm>
#include <set>

namespace kvgate::discovery {
namespace {

bool same_worker(const config::WorkerOptions& a, const config::WorkerOptions& b) {
  return a.id == b.id && a.url == b.url && a.kv_events == b.kv_events && a.kv_events_replay == b.kv_events_replay &&
         a.kv_capacity_blocks == b.kv_capacity_blocks && a.scrape_interval == b.scrape_interval &&
         a.scrape_timeout == b.scrape_timeout && a.upstream_api_key == b.upstream_api_key;
}

bool same_list(const std::optional<std::vector<config::WorkerOptions>>& a,
               const std::optional<std::vector<config::WorkerOptions>>& b) {
  if (a.has_value() != b.has_value()) {
    return false;
  }
  return !a || std::equal(a->begin(), a->end(), b->begin(), b->end(), same_worker);
}

std::string replace_host(std::string text, const std::string& host) {
  constexpr std::string_view kHost = "{host}";
  for (auto at = text.find(kHost); at != std::string::npos; at = text.find(kHost, at + host.size())) {
    text.replace(at, kHost.size(), host);
  }
  return text;
}

}  // namespace

bool Discovered::operator==(const Discovered& other) const {
  return same_list(dns, other.dns) && same_list(file, other.file);
}

std::string address_with_port(std::string_view address, std::uint16_t port) {
  const bool ipv6 = address.find(':') != std::string_view::npos;
  return (ipv6 ? "[" + std::string(address) + "]" : std::string(address)) + ":" + std::to_string(port);
}

std::vector<config::WorkerOptions> workers_from_addresses(const config::DnsDiscoveryOptions& dns,
                                                          std::vector<std::string> addresses) {
  std::sort(addresses.begin(), addresses.end());
  addresses.erase(std::unique(addresses.begin(), addresses.end()), addresses.end());
  std::vector<config::WorkerOptions> workers;
  workers.reserve(addresses.size());
  for (const auto& address : addresses) {
    const auto authority = address_with_port(address, dns.port);
    auto url = parse_upstream_url("http://" + authority);
    if (!url) {
      continue;  // not an address a resolver returns; nothing to route to
    }
    config::WorkerOptions worker = dns.each;
    worker.id = authority;
    worker.url = "http://" + authority;
    worker.endpoint = *url;
    // ZMQ wants IPv6 literals in brackets too.
    const auto zmq_host = address.find(':') != std::string::npos ? "[" + address + "]" : address;
    worker.kv_events = dns.kv_events.empty() ? "" : replace_host(dns.kv_events, zmq_host);
    worker.kv_events_replay = dns.kv_events_replay.empty() ? "" : replace_host(dns.kv_events_replay, zmq_host);
    worker.kv_capacity_blocks = dns.kv_capacity_blocks;
    workers.push_back(std::move(worker));
  }
  return workers;
}

config::Options with_discovered(const config::Options& base, const DiscoveredByModel& discovered,
                                std::vector<std::string>* skipped) {
  config::Options options = base;
  std::set<std::string, std::less<>> ids;
  std::set<std::string, std::less<>> urls;
  for (const auto& model : options.models) {
    for (const auto& worker : model.workers) {
      ids.insert(worker.id);
      urls.insert(worker.url);
    }
  }
  for (auto& model : options.models) {
    auto found = discovered.find(model.name);
    if (found == discovered.end()) {
      continue;
    }
    for (const auto* list : {&found->second.file, &found->second.dns}) {
      if (!*list) {
        continue;
      }
      for (const auto& worker : **list) {
        if (ids.contains(worker.id) || urls.contains(worker.url)) {
          if (skipped != nullptr) {
            skipped->push_back(model.name + ": " + worker.id + " (" + worker.url + ")");
          }
          continue;
        }
        ids.insert(worker.id);
        urls.insert(worker.url);
        model.workers.push_back(worker);
        if (model.workers.back().upstream_api_key.empty()) {
          model.workers.back().upstream_api_key = model.upstream_api_key;
        }
      }
    }
  }
  return options;
}

}  // namespace kvgate::discovery
