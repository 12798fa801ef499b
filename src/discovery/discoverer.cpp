#include "kvgate/discovery/discoverer.hpp"

#include <arpa/inet.h>
#include <arpa/nameser.h>
#include <netdb.h>
#include <netinet/in.h>
#include <resolv.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>

#include <array>

#include "kvgate/config/loader.hpp"
#include "kvgate/core/file.hpp"

namespace kvgate::discovery {

using Clock = std::chrono::steady_clock;

Result<std::vector<std::string>, std::string> resolve_addresses(const std::string& name,
                                                                const std::string& nameserver) {
  struct __res_state state {};
  if (res_ninit(&state) != 0) {
    return unexpected(std::string("cannot initialise the resolver"));
  }
  state.retrans = 2;  // seconds per try
  state.retry = 2;
  if (!nameserver.empty()) {
    auto address = parse_listen_address(nameserver);
    sockaddr_in server{};
    server.sin_family = AF_INET;
    if (!address || inet_pton(AF_INET, address->host.c_str(), &server.sin_addr) != 1) {
      res_nclose(&state);
      return unexpected("nameserver " + nameserver + " is not an IPv4 address and port");
    }
    server.sin_port = htons(address->port);
    state.nsaddr_list[0] = server;
    state.nscount = 1;
  }
  std::vector<std::string> addresses;
  std::string failure;
  std::array<unsigned char, 65'535> answer{};
  for (int type : {ns_t_a, ns_t_aaaa}) {
    const int size = res_nsearch(&state, name.c_str(), ns_c_in, type, answer.data(), static_cast<int>(answer.size()));
    if (size < 0) {
      // No such name, or no records of this type: an answer, not a failure.
      if (state.res_h_errno != HOST_NOT_FOUND && state.res_h_errno != NO_DATA) {
        failure = hstrerror(state.res_h_errno);
      }
      continue;
    }
    ns_msg message{};
    if (ns_initparse(answer.data(), size, &message) < 0) {
      failure = "a malformed DNS answer";
      continue;
    }
    for (int index = 0; index < ns_msg_count(message, ns_s_an); ++index) {
      ns_rr record{};
      if (ns_parserr(&message, ns_s_an, index, &record) < 0) {
        break;
      }
      char text[INET6_ADDRSTRLEN] = {};
      if (ns_rr_type(record) == ns_t_a && ns_rr_rdlen(record) == 4) {
        inet_ntop(AF_INET, ns_rr_rdata(record), text, sizeof text);
        addresses.emplace_back(text);
      } else if (ns_rr_type(record) == ns_t_aaaa && ns_rr_rdlen(record) == 16) {
        inet_ntop(AF_INET6, ns_rr_rdata(record), text, sizeof text);
        addresses.emplace_back(text);
      }
    }
  }
  res_nclose(&state);
  if (addresses.empty() && !failure.empty()) {
    return unexpected("DNS lookup of " + name + " failed: " + failure);
  }
  return addresses;
}

namespace {

// What tells a changed file apart without reading it.
std::string signature_of(const std::string& path) {
  struct stat status {};
  if (::stat(path.c_str(), &status) != 0) {
    return {};
  }
  return std::to_string(status.st_ino) + ":" + std::to_string(status.st_size) + ":" +
         std::to_string(status.st_mtim.tv_sec) + "." + std::to_string(status.st_mtim.tv_nsec);
}

}  // namespace

Discoverer::~Discoverer() {
  stop();
}

std::string_view to_string(SourceKind kind) {
  return kind == SourceKind::dns ? "dns" : "file";
}

DiscoveryStats::DiscoveryStats(prometheus::Registry& registry)
    : workers_(prometheus::BuildGauge()
                   .Name("kvgate_discovered_workers")
                   .Help("Workers a model's workers_from source (dns, file) last returned")
                   .Register(registry)),
      errors_(prometheus::BuildCounter()
                  .Name("kvgate_discovery_errors_total")
                  .Help("Failed DNS lookups and unreadable or invalid workers files (the last good list is kept)")
                  .Register(registry)) {}

void DiscoveryStats::declare(std::string_view model, SourceKind kind) {
  errors_.Add({{"model", std::string(model)}, {"source", std::string(to_string(kind))}});
}

void DiscoveryStats::found(std::string_view model, SourceKind kind, std::size_t workers) {
  workers_.Add({{"model", std::string(model)}, {"source", std::string(to_string(kind))}})
      .Set(static_cast<double>(workers));
}

void DiscoveryStats::failed(std::string_view model, SourceKind kind) {
  errors_.Add({{"model", std::string(model)}, {"source", std::string(to_string(kind))}}).Increment();
}

std::vector<Discoverer::Source> Discoverer::sources_of(const config::Options& base) {
  std::vector<Source> sources;
  for (const auto& model : base.models) {
    if (model.workers_from.any()) {
      sources.push_back({model.name, model.workers_from.dns, model.workers_from.file});
    }
  }
  return sources;
}

void Discoverer::declare(const std::vector<Source>& sources) {
  for (const auto& source : sources) {
    if (source.dns) {
      stats_.declare(source.model, SourceKind::dns);
    }
    if (source.file) {
      stats_.declare(source.model, SourceKind::file);
    }
  }
}

bool Discoverer::poll(std::vector<Source>& sources, DiscoveredByModel& result, bool force) {
  const auto now = Clock::now();
  bool changed = false;
  DiscoveredByModel next;
  for (auto& source : sources) {
    auto previous = result.find(source.model);
    Discovered found = previous != result.end() ? previous->second : Discovered{};
    if (source.dns && (force || now >= source.next_dns)) {
      source.next_dns = now + source.dns->interval;
      auto addresses = resolve_addresses(source.dns->name, source.dns->nameserver);
      if (addresses) {
        auto workers = workers_from_addresses(*source.dns, std::move(*addresses));
        if (workers.empty() && found.dns && !found.dns->empty()) {
          spdlog::warn("discovery: model {}: {} has no addresses now; its {} discovered worker(s) drain", source.model,
                       source.dns->name, found.dns->size());
        }
        stats_.found(source.model, SourceKind::dns, workers.size());
        found.dns = std::move(workers);
      } else {
        stats_.failed(source.model, SourceKind::dns);
        spdlog::warn("discovery: model {}: {}; keeping the last {} worker(s)", source.model, addresses.error(),
                     found.dns ? found.dns->size() : 0);
      }
    }
    if (source.file && (force || now >= source.next_file)) {
      source.next_file = now + std::chrono::seconds(1);
      auto signature = signature_of(source.file->path);
      if (signature.empty()) {
        if (source.file_signature != "missing") {
          stats_.failed(source.model, SourceKind::file);
          spdlog::warn("discovery: model {}: cannot read {}; keeping the last {} worker(s)", source.model,
                       source.file->path, found.file ? found.file->size() : 0);
          source.file_signature = "missing";
        }
      } else if (signature != source.file_signature) {
        source.file_signature = signature;
        // A worker list is a few lines per worker; 16 MiB is a typo'd path.
        constexpr std::size_t kMaxWorkerListBytes = std::size_t{16} << 20;
        auto text = read_whole_file(source.file->path, kMaxWorkerListBytes);
        auto workers = text ? config::load_worker_list(*text, source.file->path)
                            : config::WorkerListResult(unexpected(std::vector<config::Problem>{
                                  config::Problem{source.file->path, 0, "", text.error().message}}));
        if (workers) {
          stats_.found(source.model, SourceKind::file, workers->size());
          found.file = std::move(*workers);
        } else {
          stats_.failed(source.model, SourceKind::file);
          for (const auto& problem : workers.error()) {
            spdlog::error("discovery: model {}: {}", source.model, problem.to_string());
          }
          spdlog::error("discovery: model {}: keeping the last {} worker(s) of {}", source.model,
                        found.file ? found.file->size() : 0, source.file->path);
        }
      }
    }
    changed = changed || previous == result.end() || !(previous->second == found);
    next.emplace(source.model, std::move(found));
  }
  changed = changed || next.size() != result.size();
  result = std::move(next);
  return changed;
}

DiscoveredByModel Discoverer::discover_now(const config::Options& base) {
  auto sources = sources_of(base);
  declare(sources);
  DiscoveredByModel result;
  poll(sources, result, true);
  std::lock_guard lock(mutex_);
  result_ = result;
  return result;
}

void Discoverer::watch(const config::Options& base, OnChange on_change) {
  {
    std::lock_guard lock(mutex_);
    pending_sources_ = sources_of(base);
    declare(pending_sources_);
    on_change_ = std::move(on_change);
    retarget_ = true;
  }
  wake_.notify_one();
  if (!thread_.joinable() && !pending_sources_.empty()) {
    thread_ = std::thread([this] { run(); });
  }
}

void Discoverer::stop() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_one();
  if (thread_.joinable()) {
    thread_.join();
  }
}

void Discoverer::run() {
  std::vector<Source> sources;
  DiscoveredByModel result;
  OnChange on_change;
  while (true) {
    {
      std::unique_lock lock(mutex_);
      wake_.wait_for(lock, std::chrono::milliseconds(100), [&] { return stopping_ || retarget_; });
      if (stopping_) {
        return;
      }
      if (retarget_) {
        // Keep what is known of models that stay; their sources are due now.
        sources = std::move(pending_sources_);
        on_change = on_change_;
        result = result_;
        retarget_ = false;
      }
    }
    if (poll(sources, result, false)) {
      {
        std::lock_guard lock(mutex_);
        result_ = result;
      }
      if (on_change) {
        on_change(result);
      }
    }
  }
}

}  // namespace kvgate::discovery
