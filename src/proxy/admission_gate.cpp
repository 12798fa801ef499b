#include "kvgate/proxy/admission_gate.hpp"

#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/this_coro.hpp>

#include <algorithm>
#include <chrono>

#include "kvgate/core/clock.hpp"
#include "kvgate/route/routing_table.hpp"

namespace kvgate::proxy {

AdmissionStats::AdmissionStats(prometheus::Registry& registry)
    : rejections_(prometheus::BuildCounter()
                      .Name("kvgate_admission_rejections_total")
                      .Help("Requests admission refused with 429 (or that left while queued), by tenant and reason "
                            "(requests_per_minute, prompt_tokens_per_minute, queue_full, queue_timeout, abandoned)")
                      .Register(registry)),
      wait_(prometheus::BuildHistogram()
                .Name("kvgate_admission_wait_seconds")
                .Help("Time an admitted request waited for a slot, by tenant (0 when it got one at once)")
                .Register(registry)),
      queue_(prometheus::BuildGauge()
                 .Name("kvgate_admission_queue_length")
                 .Help("Requests waiting for an admission slot")
                 .Register(registry)
                 .Add({})),
      admitted_(prometheus::BuildGauge()
                    .Name("kvgate_admission_admitted")
                    .Help("Inference requests holding an admission slot (only when admission limits concurrency)")
                    .Register(registry)
                    .Add({})) {}

void AdmissionStats::declare_tenant(std::string_view tenant) {
  const std::string name(tenant);
  for (auto reason : admission::kRefusalReasons) {
    rejections_.Add({{"tenant", name}, {"reason", std::string(admission::to_string(reason))}});
  }
}

void AdmissionStats::refused(std::string_view tenant, admission::RefusalReason reason) {
  rejections_.Add({{"tenant", std::string(tenant)}, {"reason", std::string(admission::to_string(reason))}}).Increment();
}

void AdmissionStats::waited(std::string_view tenant, double seconds) {
  // Seconds: a slot freed at once to the longest admission.queue.max_wait.
  static const prometheus::Histogram::BucketBoundaries kBuckets{0.001, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30};
  wait_.Add({{"tenant", std::string(tenant)}}, kBuckets).Observe(seconds);
}

void AdmissionStats::set_state(std::size_t waiting, std::uint32_t admitted) {
  queue_.Set(static_cast<double>(waiting));
  admitted_.Set(admitted);
}

namespace asio = boost::asio;
using namespace boost::asio::experimental::awaitable_operators;

AdmissionTicket& AdmissionTicket::operator=(AdmissionTicket&& other) noexcept {
  if (this != &other) {
    release();
    gate_ = std::exchange(other.gate_, nullptr);
    table_ = std::move(other.table_);
    model_ = std::exchange(other.model_, nullptr);
  }
  return *this;
}

void AdmissionTicket::release() {
  if (gate_ != nullptr) {
    gate_->release(*model_);
    gate_ = nullptr;
    table_.reset();
    model_ = nullptr;
  }
}

std::optional<admission::Refusal> AdmissionGate::check_rates(const tenant::Tenant& tenant, std::uint32_t prompt_tokens,
                                                             std::uint64_t now_ms) {
  const auto& limits = tenant.limits;
  if (limits.requests_per_minute <= 0 && limits.prompt_tokens_per_minute <= 0) {
    return std::nullopt;
  }
  std::lock_guard lock(rates_mutex_);
  auto& buckets = rates_[tenant.name];
  // A reload may have changed, added or removed a limit.
  auto sync = [&](std::optional<admission::TokenBucket>& bucket, double per_minute) {
    if (per_minute <= 0) {
      bucket.reset();
    } else if (!bucket) {
      bucket.emplace(per_minute, now_ms);
    } else if (bucket->per_minute() != per_minute) {
      bucket->set_per_minute(per_minute);
    }
  };
  sync(buckets.requests, limits.requests_per_minute);
  sync(buckets.tokens, limits.prompt_tokens_per_minute);
  const auto requests_wait = buckets.requests ? buckets.requests->wait_ms(now_ms) : 0;
  const auto tokens_wait = buckets.tokens ? buckets.tokens->wait_ms(now_ms) : 0;
  if (requests_wait > 0 || tokens_wait > 0) {
    const auto reason = requests_wait > 0 ? admission::RefusalReason::requests_per_minute
                                          : admission::RefusalReason::prompt_tokens_per_minute;
    stats_.refused(tenant.name, reason);
    return admission::Refusal{reason, std::max(requests_wait, tokens_wait)};
  }
  if (buckets.requests) {
    buckets.requests->take(1, now_ms);
  }
  if (buckets.tokens) {
    buckets.tokens->take(prompt_tokens, now_ms);
  }
  return std::nullopt;
}

bool AdmissionGate::has_room(const route::RoutingTable& table, const route::ModelRoute& model, std::uint64_t hold_key,
                             std::uint64_t now_ms, bool ignore_holds) const {
  const auto& options = table.options->admission;
  if (options.max_in_flight > 0 && admitted_ >= options.max_in_flight) {
    return false;
  }
  const auto room = route::model_room(model, options, hold_key, now_ms);
  if (!room) {
    return true;
  }
  auto held = per_model_.find(model.name);
  const std::uint64_t in_flight = held == per_model_.end() ? 0 : held->second;
  return in_flight + (ignore_holds ? 0 : room->kept) < room->capacity;
}

std::vector<AdmissionGate::WaiterPtr> AdmissionGate::dispatch() {
  std::vector<WaiterPtr> granted;
  const auto now_ms = monotonic_now_ms();
  const auto now = std::chrono::steady_clock::now();
  auto may_go = [&](const WaiterPtr& waiter) {
    // Kept slots never make a request wait past half the queue's maximum
    // wait: by then it takes one.
    const bool waited_long = now - waiter->since >= waiter->table->options->admission.queue.max_wait / 2;
    return has_room(*waiter->table, *waiter->model, waiter->hold_key, now_ms, waited_long);
  };
  for (;;) {
    // A turn whose slot was kept for it goes first, whatever waits ahead
    // of it (those wait for the slot it was kept from them for).
    auto next = queue_.take_first([&](const WaiterPtr& waiter) {
      return !waiter->abandoned && waiter->hold_key != 0 && waiter->table->options->admission.hold_slots &&
             route::slot_kept_for(*waiter->model, waiter->hold_key, now_ms) && may_go(waiter);
    });
    if (!next) {
      next = queue_.pop(may_go, [](const WaiterPtr& waiter) { return waiter->abandoned; });
    }
    if (!next) {
      break;
    }
    auto& waiter = *next;
    waiter->granted = true;
    --waiting_;
    ++admitted_;
    ++per_model_[waiter->model->name];
    granted.push_back(std::move(waiter));
  }
  // Waiters that gave up stay in their lanes until popped; sweep them when
  // they outnumber the live ones, so a long-blocked queue cannot grow.
  if (queue_.size() > 2 * waiting_ + 64) {
    queue_.remove_if([](const WaiterPtr& waiter) { return waiter->abandoned; });
  }
  return granted;
}

void AdmissionGate::wake(const std::vector<WaiterPtr>& granted, const Waiter* except) {
  for (const auto& waiter : granted) {
    if (waiter.get() != except) {
      // The timer belongs to the waiter's I/O thread: cancel it there.
      asio::post(waiter->timer.get_executor(), [waiter] { waiter->timer.cancel(); });
    }
  }
}

void AdmissionGate::release(const route::ModelRoute& model) {
  std::vector<WaiterPtr> granted;
  {
    std::lock_guard lock(mutex_);
    --admitted_;
    if (auto held = per_model_.find(model.name); held != per_model_.end() && held->second > 0) {
      --held->second;
    }
    granted = dispatch();
    // A slot the request freed may be kept for its session's next turn
    // (admission.hold_slots): the model's waiters wake to wait for the
    // hold's end too, which no release announces.
    if (waiting_ > 0 && route::next_hold_end(model, monotonic_now_ms())) {
      queue_.for_each([&](const WaiterPtr& waiter) {
        if (waiter->model->name == model.name && !waiter->granted && !waiter->abandoned) {
          granted.push_back(waiter);
        }
      });
    }
    publish_queue_length();
  }
  wake(granted, nullptr);
}

void AdmissionGate::publish_queue_length() {
  stats_.set_state(waiting_, admitted_);
}

http::awaitable<Result<AdmissionTicket, admission::Refusal>> AdmissionGate::admit(
    std::shared_ptr<const route::RoutingTable> table, const route::ModelRoute& model, const tenant::Tenant& tenant,
    http::tcp::socket& client, std::uint64_t hold_key) {
  const auto& options = table->options->admission;
  if (!options.limits_concurrency()) {
    co_return AdmissionTicket{};
  }
  const auto started = std::chrono::steady_clock::now();
  auto waiter = std::make_shared<Waiter>(co_await asio::this_coro::executor);
  waiter->table = table;
  waiter->model = &model;
  waiter->hold_key = hold_key;
  waiter->since = started;
  std::vector<WaiterPtr> granted;
  bool full = false;
  bool granted_at_once = false;  // read under the lock: another thread's release may grant it any time
  {
    std::lock_guard lock(mutex_);
    if (weights_from_ != table->tenants.get()) {
      std::vector<double> weights;
      for (const auto& each : table->tenants->tenants()) {
        weights.push_back(each.weight);
      }
      weights.push_back(1.0);  // the anonymous tenant
      queue_.set_weights(std::move(weights));
      weights_from_ = table->tenants.get();
    }
    // In the queue first, then the fair order decides: a newcomer never
    // overtakes a waiter that may go.
    queue_.push(tenant.index, waiter);
    ++waiting_;
    granted = dispatch();
    if (!waiter->granted && waiting_ > options.queue.max_length) {
      waiter->abandoned = true;
      --waiting_;
      full = true;
    }
    granted_at_once = waiter->granted;
    publish_queue_length();
  }
  wake(granted, waiter.get());
  if (full) {
    stats_.refused(tenant.name, admission::RefusalReason::queue_full);
    co_return unexpected(admission::Refusal{admission::RefusalReason::queue_full, 1000});
  }
  if (!granted_at_once) {
    const auto deadline = std::chrono::steady_clock::now() + options.queue.max_wait;
    bool client_gone = false;
    bool watch_client = true;
    for (;;) {
      // Woken when granted (the timer cancelled), at the deadline, or when a
      // slot kept for a session's turn stops being kept, which nothing else
      // announces: then the queue is served again.
      auto wake_at = deadline;
      {
        std::lock_guard lock(mutex_);
        if (waiter->granted) {
          break;
        }
        const auto now_ms = monotonic_now_ms();
        if (const auto end = options.hold_slots ? route::next_hold_end(model, now_ms) : std::nullopt) {
          wake_at = std::min(wake_at, std::chrono::steady_clock::now() + std::chrono::milliseconds(*end - now_ms));
        }
      }
      waiter->timer.expires_at(wake_at);
      if (watch_client) {
        // Awaited on its own statement: g++ 12 miscompiles co_await inside
        // larger expressions.
        auto ended = co_await (waiter->timer.async_wait(http::use_nothrow) || http::wait_until_peer_closes(client));
        client_gone = ended.index() == 1 && std::get<1>(ended);
        // The client sent more (a pipelined request) and is still there:
        // the timer alone decides.
        watch_client = ended.index() == 0;
        if (client_gone) {
          break;
        }
      } else {
        co_await waiter->timer.async_wait(http::use_nothrow);
      }
      if (std::chrono::steady_clock::now() >= deadline) {
        break;
      }
      std::vector<WaiterPtr> served;
      {
        std::lock_guard lock(mutex_);
        served = dispatch();
        publish_queue_length();
      }
      wake(served, waiter.get());
    }
    std::lock_guard lock(mutex_);
    if (!waiter->granted) {
      waiter->abandoned = true;
      --waiting_;
      publish_queue_length();
      const auto reason = client_gone ? admission::RefusalReason::abandoned : admission::RefusalReason::queue_timeout;
      stats_.refused(tenant.name, reason);
      co_return unexpected(admission::Refusal{reason, 1000});
    }
  }
  stats_.waited(tenant.name, std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count());
  co_return AdmissionTicket{this, std::move(table), &model};
}

std::size_t AdmissionGate::waiting() const {
  std::lock_guard lock(mutex_);
  return waiting_;
}

Result<AdmissionTicket, admission::Refusal> AdmissionGate::try_admit(std::shared_ptr<const route::RoutingTable> table,
                                                                     const route::ModelRoute& model,
                                                                     const tenant::Tenant& tenant,
                                                                     std::uint64_t hold_key) {
  if (!table->options->admission.limits_concurrency()) {
    return AdmissionTicket{};
  }
  {
    std::lock_guard lock(mutex_);
    if (waiting_ == 0 && has_room(*table, model, hold_key, monotonic_now_ms())) {
      ++admitted_;
      ++per_model_[model.name];
      publish_queue_length();
      return AdmissionTicket{this, std::move(table), &model};
    }
  }
  stats_.refused(tenant.name, admission::RefusalReason::at_capacity);
  return unexpected(admission::Refusal{admission::RefusalReason::at_capacity, 1000});
}

std::uint32_t AdmissionGate::admitted() const {
  std::lock_guard lock(mutex_);
  return admitted_;
}

}  // namespace kvgate::proxy
