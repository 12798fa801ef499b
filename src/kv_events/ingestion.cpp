#include "kvgate/kv_events/ingestion.hpp"

#include <poll.h>
#include <spdlog/spdlog.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <absl/container/flat_hash_map.h>
#include <chrono>
#include <condition_variable>
#include <map>
#include <unordered_set>
#include <zmq.hpp>

#include "feed.hpp"

namespace kvgate::kv_events {

IndexStats::IndexStats(prometheus::Registry& registry)
    : evictions(prometheus::BuildCounter()
                    .Name("kvgate_index_evictions_total")
                    .Help("(block, worker) entries dropped from the prefix index to stay under index.max_entries")
                    .Register(registry)
                    .Add({})),
      unmatched_listener_messages(prometheus::BuildCounter()
                                      .Name("kvgate_kv_events_unmatched_total")
                                      .Help("KV-event messages on kv_events.listen whose topic names no worker "
                                            "(kv@<host:port or host>@<model>), skipped")
                                      .Register(registry)
                                      .Add({})) {}

namespace {

// llm-d's topic kv@<address>@<model> -> <address>; empty when the topic has
// another form.
std::string_view topic_address(std::string_view topic) {
  constexpr std::string_view kPrefix = "kv@";
  if (!topic.starts_with(kPrefix)) {
    return {};
  }
  topic.remove_prefix(kPrefix.size());
  const auto end = topic.find('@');
  return end == std::string_view::npos ? std::string_view() : topic.substr(0, end);
}

}  // namespace

struct Ingestion::Commands {
  // A routing-time insert, its withdrawal or its request's end; kept in
  // one queue so that neither of the last two overtakes the insert.
  struct Assume {
    std::shared_ptr<ModelCache> cache;
    WorkerSlot slot = 0;
    std::vector<BlockHash> blocks;
    std::uint64_t ticket = 0;
    Command command = Command::assume;
    std::optional<std::uint32_t> reported_blocks;  // finish: the engine's figure
  };
  struct Configure {
    std::vector<WorkerFeed> feeds;
    config::IndexOptions index_options;
    config::KvEventOptions event_options;
  };
  std::mutex mutex;
  std::vector<Assume> assumes;
  std::optional<Configure> configure;
  bool stop = false;
  // Inserts handed over and inserts applied, for settle(): both only grow.
  std::uint64_t enqueued = 0;
  std::uint64_t applied = 0;
  std::condition_variable applied_changed;
};

// Everything the ingestion thread owns. Only that thread touches it.
class Ingestion::Loop {
 public:
  Loop(prometheus::Registry& registry, config::IndexOptions index_options, config::KvEventOptions event_options)
      : context_(1), stats_(registry), index_options_(index_options), event_options_(event_options) {}

  void run(Commands& commands, int wake_fd) {
    auto next_tick = Clock::now();
    while (true) {
      std::vector<zmq::pollitem_t> items;
      items.push_back({nullptr, wake_fd, ZMQ_POLLIN, 0});
      for (auto& [key, feed] : feeds_) {
        feed->add_poll_items(items);
      }
      if (listener_) {
        items.push_back({listener_->handle(), 0, ZMQ_POLLIN, 0});
      }
      auto wait = std::chrono::duration_cast<std::chrono::milliseconds>(next_tick - Clock::now());
      zmq::poll(items.data(), items.size(), std::max(wait, std::chrono::milliseconds(0)));
      if ((items[0].revents & ZMQ_POLLIN) != 0) {
        std::uint64_t count = 0;
        [[maybe_unused]] auto bytes = ::read(wake_fd, &count, sizeof count);
      }
      if (!drain(commands)) {
        return;
      }
      for (auto& [key, feed] : feeds_) {
        feed->receive(now_ms());
      }
      receive_listener();
      if (Clock::now() >= next_tick) {
        tick();
        next_tick = Clock::now() + kTick;
      }
    }
  }

 private:
  using Clock = std::chrono::steady_clock;
  static constexpr auto kTick = std::chrono::milliseconds(100);
  using FeedKey = std::pair<ModelCache*, WorkerSlot>;

  std::uint64_t now_ms() const {
    return static_cast<std::uint64_t>(
        std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - started_).count());
  }

  // Applies queued commands; false when asked to stop.
  bool drain(Commands& commands) {
    std::vector<Commands::Assume> assumes;
    std::optional<Commands::Configure> configure;
    bool stop = false;
    {
      std::lock_guard lock(commands.mutex);
      assumes.swap(commands.assumes);
      configure.swap(commands.configure);
      stop = commands.stop;
    }
    apply(assumes, configure);
    if (!assumes.empty()) {
      {
        std::lock_guard lock(commands.mutex);
        commands.applied += assumes.size();
      }
      commands.applied_changed.notify_all();
    }
    return !stop;
  }

  void apply(std::vector<Commands::Assume>& assumes, std::optional<Commands::Configure>& configure) {
    if (configure) {
      reconfigure(std::move(*configure));
    }
    for (auto& assume : assumes) {
      auto found = feeds_.find(FeedKey{assume.cache.get(), assume.slot});
      if (found == feeds_.end()) {
        continue;
      }
      switch (assume.command) {
        case Command::assume:
          found->second->assume(assume.blocks, now_ms(), assume.ticket);
          break;
        case Command::withdraw:
          found->second->withdraw(assume.blocks, assume.ticket, now_ms());
          break;
        case Command::finish:
          found->second->finish(assume.ticket, now_ms(), assume.reported_blocks);
          break;
      }
    }
  }

  // The listener's messages, each handed to the feed its topic names.
  void receive_listener() {
    if (!listener_) {
      return;
    }
    constexpr int kMaxMessages = 4096;  // bound on one wake-up's work, as a feed's
    for (int count = 0; count < kMaxMessages; ++count) {
      std::vector<zmq::message_t> frames;
      zmq::message_t frame;
      if (!listener_->recv(frame, zmq::recv_flags::dontwait)) {
        return;
      }
      frames.push_back(std::move(frame));
      while (listener_->get(zmq::sockopt::rcvmore) != 0) {
        zmq::message_t more;
        (void)listener_->recv(more, zmq::recv_flags::none);  // the rest of a multipart message is already here
        frames.push_back(std::move(more));
      }
      const auto topic = frames.front().to_string_view();
      const auto address = topic_address(topic);
      // A lookup without a copy (Debian's Abseil has its own string_view).
      auto found = listener_feeds_.find(absl::string_view(address.data(), address.size()));
      if (found == listener_feeds_.end() || found->second == nullptr) {
        stats_.unmatched_listener_messages.Increment();
        constexpr std::size_t kLoggedTopics = 64;  // a flood of topics logs this many, then is only counted
        if (logged_topics_.size() < kLoggedTopics && logged_topics_.insert(std::string(topic)).second) {
          spdlog::warn(
              "kv events: a message on kv_events.listen has topic '{}', which names {} worker; skipped "
              "(kvgate_kv_events_unmatched_total; the topic must be kv@<host:port or host>@<model> of a "
              "worker with kv_events: listen)",
              topic.substr(0, 200), found == listener_feeds_.end() ? "no" : "more than one");
        }
        continue;
      }
      found->second->deliver(frames, now_ms());
    }
  }

  // The listener bound to kv_events.listen (rebound when it changes), and
  // which feed each topic address names (null: more than one).
  void configure_listener() {
    if (event_options_.listen != listener_address_) {
      listener_.reset();
      listener_address_ = event_options_.listen;
      if (!listener_address_.empty()) {
        try {
          listener_.emplace(context_, zmq::socket_type::sub);
          listener_->set(zmq::sockopt::linger, 0);
          listener_->set(zmq::sockopt::subscribe, "");
          listener_->bind(listener_address_);
          spdlog::info("kv events: listening on {} for engines that publish to kvgate", listener_address_);
        } catch (const zmq::error_t& error) {
          spdlog::error("kv events: cannot bind kv_events.listen {}: {}", listener_address_, error.what());
          listener_.reset();
        }
      }
    }
    listener_feeds_.clear();
    for (auto& [key, feed] : feeds_) {
      if (!feed->on_listener()) {
        continue;
      }
      for (const auto& address : feed->listener_addresses()) {
        auto [at, added] = listener_feeds_.emplace(address, feed.get());
        if (!added && at->second != feed.get()) {
          at->second = nullptr;  // two workers share a host: only host:port tells them apart
        }
      }
    }
  }

  void reconfigure(Commands::Configure configure) {
    index_options_ = configure.index_options;
    event_options_ = configure.event_options;
    std::map<FeedKey, std::unique_ptr<Feed>> next;
    for (auto& worker_feed : configure.feeds) {
      FeedKey key{worker_feed.cache.get(), worker_feed.slot};
      auto found = feeds_.find(key);
      if (found != feeds_.end() && found->second->same_source(worker_feed)) {
        found->second->update(worker_feed, settings());
        next.emplace(key, std::move(found->second));
        feeds_.erase(found);
        continue;
      }
      if (found != feeds_.end()) {
        found->second->drop_entries();  // other endpoints: what we knew is about another process
        feeds_.erase(found);
      }
      next.emplace(key, std::make_unique<Feed>(context_, stats_, std::move(worker_feed), settings(), now_ms()));
    }
    for (auto& [key, feed] : feeds_) {
      feed->drop_entries();  // removed from the config
    }
    feeds_ = std::move(next);
    configure_listener();
  }

  FeedSettings settings() const {
    return {index_options_.speculative_ttl.count(), index_options_.approximate_ttl.count(),
            event_options_.replay_timeout.count(), event_options_.silence_after.count()};
  }

  void tick() {
    auto now = now_ms();
    std::map<ModelCache*, bool> expired;
    for (auto& [key, feed] : feeds_) {
      auto* cache = key.first;
      if (!expired[cache]) {
        cache->caches.expire(now);
        expired[cache] = true;
      }
    }
    for (auto& [key, feed] : feeds_) {
      feed->tick(now);
    }
  }

  zmq::context_t context_;
  IndexStats stats_;
  config::IndexOptions index_options_;
  config::KvEventOptions event_options_;
  std::map<FeedKey, std::unique_ptr<Feed>> feeds_;
  std::optional<zmq::socket_t> listener_;
  std::string listener_address_;
  absl::flat_hash_map<std::string, Feed*> listener_feeds_;
  std::unordered_set<std::string> logged_topics_;
  const Clock::time_point started_ = Clock::now();
};

Ingestion::Ingestion(prometheus::Registry& registry, config::IndexOptions index_options,
                     config::KvEventOptions event_options)
    : commands_(std::make_unique<Commands>()),
      loop_(std::make_unique<Loop>(registry, index_options, event_options)),
      wake_fd_(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) {
  if (wake_fd_ < 0) {
    throw std::runtime_error("eventfd failed");
  }
  thread_ = std::jthread([this] { loop_->run(*commands_, wake_fd_); });
}

Ingestion::~Ingestion() {
  {
    std::lock_guard lock(commands_->mutex);
    commands_->stop = true;
  }
  wake();
  thread_.join();
  ::close(wake_fd_);
}

void Ingestion::wake() {
  std::uint64_t one = 1;
  [[maybe_unused]] auto bytes = ::write(wake_fd_, &one, sizeof one);
}

void Ingestion::configure(std::vector<WorkerFeed> feeds, config::IndexOptions index_options,
                          config::KvEventOptions event_options) {
  {
    std::lock_guard lock(commands_->mutex);
    commands_->configure = Commands::Configure{std::move(feeds), index_options, event_options};
  }
  wake();
}

void Ingestion::assume(const std::shared_ptr<ModelCache>& cache, WorkerSlot slot, std::span<const BlockHash> blocks,
                       std::uint64_t ticket) {
  enqueue(cache, slot, blocks, ticket, Command::assume);
}

void Ingestion::withdraw(const std::shared_ptr<ModelCache>& cache, WorkerSlot slot, std::span<const BlockHash> blocks,
                         std::uint64_t ticket) {
  enqueue(cache, slot, blocks, ticket, Command::withdraw);
}

void Ingestion::finish(const std::shared_ptr<ModelCache>& cache, WorkerSlot slot, std::uint64_t ticket,
                       std::optional<std::uint32_t> reported_blocks) {
  enqueue(cache, slot, {}, ticket, Command::finish, reported_blocks);
}

void Ingestion::enqueue(const std::shared_ptr<ModelCache>& cache, WorkerSlot slot, std::span<const BlockHash> blocks,
                        std::uint64_t ticket, Command kind, std::optional<std::uint32_t> reported_blocks) {
  if (blocks.empty() && kind != Command::finish) {
    return;
  }
  Commands::Assume command{cache, slot, {blocks.begin(), blocks.end()}, ticket, kind, reported_blocks};
  bool first = false;
  {
    std::lock_guard lock(commands_->mutex);
    first = commands_->assumes.empty();
    commands_->assumes.push_back(std::move(command));
    ++commands_->enqueued;
  }
  // The thread takes the whole queue when it wakes: one wake-up (a syscall)
  // per batch of inserts, not one per request.
  if (first) {
    wake();
  }
}

bool Ingestion::settle(std::chrono::milliseconds timeout) {
  std::unique_lock lock(commands_->mutex);
  const auto target = commands_->enqueued;
  return commands_->applied_changed.wait_for(lock, timeout, [&] { return commands_->applied >= target; });
}

}  // namespace kvgate::kv_events
