#pragma once
// The routing-policy seam. A policy is pure: it gets the request's routing
// context and an immutable view of the model's workers, and returns a
// Decision that explains itself. It never touches sockets, clocks or shared
// state, so the same inputs always give the same decision (tests and the
// /debug/route dry run rely on this).
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace kvgate::policy {

// One worker as the policy sees it, built by the shell from live state.
struct WorkerView {
  std::string_view id;
  bool healthy = true;
  std::uint32_t in_flight = 0;  // requests the gateway dispatched and has not finished
};

struct RouteRequest {
  std::string_view model;
  std::optional<std::string_view> session_key;
  // A number the shell increments per decision; policies that rotate use it
  // instead of hidden mutable state.
  std::uint64_t sequence = 0;
  // Indices into the worker span already tried for this request (retries).
  std::span<const std::size_t> excluded;
};

struct Candidate {
  std::string worker;
  bool eligible = false;
  std::string ineligible_because;  // "unhealthy", "already_tried"; empty when eligible
  std::uint32_t in_flight = 0;
  double score = 0;  // lower is better; policy-specific
};

struct Decision {
  std::optional<std::size_t> worker_index;  // empty: nothing eligible
  std::string reason;                       // decision-log vocabulary (contract)
  std::vector<Candidate> candidates;        // one per worker, in the span's order
};

class Policy {
 public:
  virtual ~Policy() = default;
  [[nodiscard]] virtual std::string_view name() const = 0;
  [[nodiscard]] virtual Decision decide(const RouteRequest& request, std::span<const WorkerView> workers) const = 0;
};

std::unique_ptr<Policy> make_round_robin();
std::unique_ptr<Policy> make_least_load();

// Shared first stage of every policy: one Candidate per worker, eligible when
// healthy and not yet tried for this request.
std::vector<Candidate> filter_candidates(const RouteRequest& request, std::span<const WorkerView> workers);

}  // namespace kvgate::policy
