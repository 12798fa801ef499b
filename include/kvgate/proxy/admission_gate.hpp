#pragma once
// Admission control, shared by every I/O thread: per-tenant rate limits
// (token buckets of requests and prompt tokens per minute), then the
// in-flight limits, beyond which requests wait in one queue served fairly
// across tenants (admission::FairQueue, weights from the tenants) or are
// refused. A slot a finishing request frees goes straight to the next
// waiter whose model has room, on that waiter's own thread.
//
// Locking: one mutex, taken only when the configuration limits something
// (a tenant with limits; admission.max_in_flight or
// max_in_flight_per_worker). Without limits admit() and the ticket cost
// nothing.
#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include <boost/asio/steady_timer.hpp>

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "kvgate/admission/fair_queue.hpp"
#include "kvgate/admission/refusal.hpp"
#include "kvgate/admission/token_bucket.hpp"
#include "kvgate/core/result.hpp"
#include "kvgate/http/beast.hpp"
#include "kvgate/route/routing_table.hpp"

namespace kvgate::proxy {

class AdmissionGate;

// Holds one admitted request's slot; gives it back (to the next waiter,
// if one may go) when destroyed. Empty when nothing limits concurrency.
class AdmissionTicket {
 public:
  AdmissionTicket() = default;
  AdmissionTicket(AdmissionGate* gate, std::shared_ptr<const route::RoutingTable> table, const route::ModelRoute* model)
      : gate_(gate), table_(std::move(table)), model_(model) {}
  AdmissionTicket(AdmissionTicket&& other) noexcept { *this = std::move(other); }
  AdmissionTicket& operator=(AdmissionTicket&& other) noexcept;
  AdmissionTicket(const AdmissionTicket&) = delete;
  AdmissionTicket& operator=(const AdmissionTicket&) = delete;
  ~AdmissionTicket() { release(); }
  void release();

 private:
  AdmissionGate* gate_ = nullptr;
  std::shared_ptr<const route::RoutingTable> table_;  // keeps model_ alive
  const route::ModelRoute* model_ = nullptr;
};

// Admission's series: refusals by tenant and reason, the wait of admitted
// requests, and the queue.
class AdmissionStats {
 public:
  explicit AdmissionStats(prometheus::Registry& registry);
  // Every refusal reason at 0 for a tenant of the configuration. Idempotent.
  void declare_tenant(std::string_view tenant);
  void refused(std::string_view tenant, admission::RefusalReason reason);
  void waited(std::string_view tenant, double seconds);
  void set_state(std::size_t waiting, std::uint32_t admitted);

 private:
  prometheus::Family<prometheus::Counter>& rejections_;
  prometheus::Family<prometheus::Histogram>& wait_;
  prometheus::Gauge& queue_;
  prometheus::Gauge& admitted_;
};

class AdmissionGate {
 public:
  explicit AdmissionGate(prometheus::Registry& registry) : stats_(registry) {}

  AdmissionStats& stats() { return stats_; }

  // The tenant's per-minute budgets: nothing is taken unless both have
  // room; then one request and `prompt_tokens` are.
  std::optional<admission::Refusal> check_rates(const tenant::Tenant& tenant, std::uint32_t prompt_tokens,
                                                std::uint64_t now_ms);

  // A slot for one request to `model`, or why not. Waits (at most
  // admission.queue.max_wait) on the calling coroutine's executor; gives up
  // early when the client closes `client`. `hold_key`: the request's session
  // (route::slot_hold_key; 0: none), whose turn goes first when a slot
  // engine's slot is kept for it (admission.hold_slots).
  http::awaitable<Result<AdmissionTicket, admission::Refusal>> admit(std::shared_ptr<const route::RoutingTable> table,
                                                                     const route::ModelRoute& model,
                                                                     const tenant::Tenant& tenant,
                                                                     http::tcp::socket& client,
                                                                     std::uint64_t hold_key = 0);

  // A slot now, or at_capacity: for a front door that cannot hold a
  // request back (the endpoint picker answers 429 instead; the gateway in
  // front of it retries or queues). Never overtakes a queued waiter.
  Result<AdmissionTicket, admission::Refusal> try_admit(std::shared_ptr<const route::RoutingTable> table,
                                                        const route::ModelRoute& model, const tenant::Tenant& tenant,
                                                        std::uint64_t hold_key = 0);

  [[nodiscard]] std::size_t waiting() const;
  [[nodiscard]] std::uint32_t admitted() const;

 private:
  friend class AdmissionTicket;

  struct Waiter {
    explicit Waiter(const boost::asio::any_io_executor& executor) : timer(executor) {}
    boost::asio::steady_timer timer;  // cancelled (on its own executor) when granted
    std::shared_ptr<const route::RoutingTable> table;
    const route::ModelRoute* model = nullptr;
    std::uint64_t hold_key = 0;  // its session (admit)
    std::chrono::steady_clock::time_point since;
    bool granted = false;    // guarded by mutex_
    bool abandoned = false;  // guarded by mutex_
  };
  using WaiterPtr = std::shared_ptr<Waiter>;

  void release(const route::ModelRoute& model);
  // Under mutex_: whether one more request to `model` (of `hold_key`'s
  // session) fits, slots kept for other sessions' turns counted as taken
  // unless `ignore_holds`.
  [[nodiscard]] bool has_room(const route::RoutingTable& table, const route::ModelRoute& model, std::uint64_t hold_key,
                              std::uint64_t now_ms, bool ignore_holds = false) const;
  // Under mutex_: grants slots to waiters in fair order while they fit
  // (each against the table it arrived with); returns the granted ones (the
  // caller wakes them outside the lock).
  std::vector<WaiterPtr> dispatch();
  static void wake(const std::vector<WaiterPtr>& granted, const Waiter* except);
  void publish_queue_length();

  AdmissionStats stats_;
  mutable std::mutex mutex_;
  std::uint32_t admitted_ = 0;                                   // slots held, all models
  std::map<std::string, std::uint32_t, std::less<>> per_model_;  // slots held, by model name (survives reloads)
  const tenant::Directory* weights_from_ = nullptr;              // the directory the queue's weights came from
  admission::FairQueue<WaiterPtr> queue_;
  std::size_t waiting_ = 0;  // queued and neither granted nor abandoned

  struct Buckets {
    std::optional<admission::TokenBucket> requests;
    std::optional<admission::TokenBucket> tokens;
  };
  std::mutex rates_mutex_;
  std::unordered_map<std::string, Buckets> rates_;  // by tenant name: survives reloads
};

}  // namespace kvgate::proxy
