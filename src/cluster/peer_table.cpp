#include "kvgate/cluster/peer_table.hpp"

namespace kvgate::cluster {

PeerTable::Peer& PeerTable::peer(std::string_view id) {
  auto found = peers_.find(id);
  if (found == peers_.end()) {
    found = peers_.emplace(std::string(id), Peer{}).first;
    found->second.status.id = std::string(id);
  }
  return found->second;
}

void PeerTable::heard(std::string_view from, std::uint64_t now_ms, double lag_ms) {
  auto& entry = peer(from);
  entry.status.last_heard_ms = std::max(entry.status.last_heard_ms, now_ms);
  entry.status.last_lag_ms = lag_ms;
  entry.silent_reported = false;
}

void PeerTable::applied(std::string_view from) {
  ++peer(from).status.applied;
}

void PeerTable::dropped(std::string_view from) {
  ++peer(from).status.dropped;
}

void PeerTable::report_load(std::string_view from, const LoadMessage& load, std::uint64_t now_ms) {
  auto& entry = peer(from);
  entry.load.clear();
  std::uint32_t in_flight = 0;
  for (const auto& worker : load.workers) {
    auto& counts = entry.load[std::string(worker.worker)];
    counts = {worker.in_flight, worker.pending_prefill_tokens, worker.pending_requests, worker.active_tokens};
    in_flight += worker.in_flight;
  }
  entry.status.in_flight = in_flight;
  entry.status.last_heard_ms = std::max(entry.status.last_heard_ms, now_ms);
}

std::vector<std::string> PeerTable::newly_silent(std::uint64_t now_ms) {
  std::vector<std::string> silent;
  for (auto& [id, entry] : peers_) {
    if (!is_live(entry, now_ms) && !entry.silent_reported) {
      entry.silent_reported = true;
      silent.push_back(id);
    }
  }
  return silent;
}

PeerTable::Sums PeerTable::sums(std::uint64_t now_ms) const {
  Sums total;
  for (const auto& [id, entry] : peers_) {
    if (!is_live(entry, now_ms)) {
      continue;
    }
    for (const auto& [key, counts] : entry.load) {
      auto& sum = total[key];
      sum.in_flight += counts.in_flight;
      sum.pending_prefill_tokens += counts.pending_prefill_tokens;
      sum.pending_requests += counts.pending_requests;
      sum.active_tokens += counts.active_tokens;
    }
  }
  return total;
}

std::vector<PeerStatus> PeerTable::status(std::uint64_t now_ms) const {
  std::vector<PeerStatus> out;
  out.reserve(peers_.size());
  for (const auto& [id, entry] : peers_) {
    auto status = entry.status;
    status.live = is_live(entry, now_ms);
    if (!status.live) {
      status.in_flight = 0;
    }
    out.push_back(std::move(status));
  }
  return out;
}

std::size_t PeerTable::live(std::uint64_t now_ms) const {
  std::size_t count = 0;
  for (const auto& [id, entry] : peers_) {
    count += is_live(entry, now_ms) ? 1 : 0;
  }
  return count;
}

}  // namespace kvgate::cluster
