#include "kvgate/cluster/cluster.hpp"

#include <hiredis/hiredis.h>
#include <spdlog/spdlog.h>
#include <unistd.h>
#include <xxhash.h>

#include <algorithm>
#include <array>
#include <charconv>
#include <chrono>
#include <limits>
#include <optional>
#include <random>

#include "kvgate/core/clock.hpp"

namespace kvgate::cluster {

namespace {

using namespace std::chrono_literals;

// How long a read may block in XREAD, and the socket timeouts around it.
constexpr int kReadBlockMs = 500;
constexpr std::uint32_t kReadCount = 512;
// Between two attempts to reach a lost engine: the reader's, and the
// publisher's (whose messages wait meanwhile).
constexpr auto kReconnectDelay = 500ms;
constexpr auto kPublishRetry = 100ms;

struct ContextDeleter {
  void operator()(redisContext* context) const { redisFree(context); }
};
using Connection = std::unique_ptr<redisContext, ContextDeleter>;

struct ReplyDeleter {
  void operator()(redisReply* reply) const { freeReplyObject(reply); }
};
using Reply = std::unique_ptr<redisReply, ReplyDeleter>;

timeval to_timeval(std::chrono::milliseconds ms) {
  return {static_cast<time_t>(ms.count() / 1000), static_cast<suseconds_t>((ms.count() % 1000) * 1000)};
}

// A connection, or why there is none.
Connection connect(const HostPort& url, std::chrono::milliseconds io_timeout, std::string& error) {
  Connection connection(redisConnectWithTimeout(url.host.c_str(), url.port, to_timeval(1'000ms)));
  if (!connection) {
    error = "out of memory";
    return nullptr;
  }
  if (connection->err != 0) {
    error = connection->errstr;
    return nullptr;
  }
  redisSetTimeout(connection.get(), to_timeval(io_timeout));
  redisEnableKeepAlive(connection.get());
  return connection;
}

std::string_view text_of(const redisReply* reply) {
  return reply != nullptr && (reply->type == REDIS_REPLY_STRING || reply->type == REDIS_REPLY_STATUS)
             ? std::string_view(reply->str, reply->len)
             : std::string_view();
}

// The entry ID to read after, as Redis orders them ("ms-seq").
std::string id_at(std::uint64_t unix_ms) {
  return std::to_string(unix_ms) + "-0";
}

struct StreamId {
  std::uint64_t ms = 0;
  std::uint64_t seq = 0;
  auto operator<=>(const StreamId&) const = default;
};

std::optional<StreamId> parse_stream_id(std::string_view text) {
  const auto dash = text.find('-');
  if (dash == std::string_view::npos) {
    return std::nullopt;
  }
  StreamId id;
  const auto* end = text.data() + text.size();
  const auto ms = std::from_chars(text.data(), text.data() + dash, id.ms);
  const auto seq = std::from_chars(text.data() + dash + 1, end, id.seq);
  if (ms.ec != std::errc() || ms.ptr != text.data() + dash || seq.ec != std::errc() || seq.ptr != end) {
    return std::nullopt;
  }
  return id;
}

}  // namespace

std::string default_replica_id() {
  std::array<char, 256> host{};
  if (gethostname(host.data(), host.size() - 1) != 0) {
    host = {};
  }
  std::string id(host.data());
  if (id.empty()) {
    id = "kvgate";
  }
  return id + "-" + std::to_string(getpid());
}

std::uint64_t peer_ticket(std::string_view peer, std::uint64_t ticket) {
  const auto peer_bits = XXH3_64bits(peer.data(), peer.size()) & 0x7fffULL;
  return (1ULL << 63) | (peer_bits << 48) | (ticket & 0xffff'ffff'ffffULL);
}

Cluster::Cluster(const config::ClusterOptions& options, const Published<const route::RoutingTable>& tables,
                 route::SessionTable& sessions, kv_events::IndexWriter* index_writer, ClusterStats& stats)
    : options_(options),
      replica_id_(options.replica_id.empty() ? default_replica_id() : options.replica_id),
      url_text_("redis://" + options.url.to_string()),
      tables_(tables),
      sessions_(sessions),
      index_writer_(index_writer),
      stats_(stats),
      outbox_(options.queue),
      started_unix_ms_(unix_now_ms()),
      incarnation_(std::random_device{}() | (static_cast<std::uint64_t>(std::random_device{}()) << 32)),
      peers_(static_cast<std::uint64_t>(options.peer_timeout.count())) {}

Cluster::~Cluster() {
  stop();
}

void Cluster::start() {
  spdlog::info("cluster: replica {} sharing state through {} stream {}", replica_id_, url_text_, options_.stream);
  publisher_ = std::thread([this] { publish_loop(); });
  reader_ = std::thread([this] { read_loop(); });
}

void Cluster::stop() {
  if (stopping_.exchange(true)) {
    return;
  }
  outbox_.interrupt();
  if (publisher_.joinable()) {
    publisher_.join();
  }
  if (reader_.joinable()) {
    reader_.join();
  }
}

ClusterStatus Cluster::status() const {
  ClusterStatus status;
  status.replica_id = replica_id_;
  status.engine = url_text_;
  status.stream = options_.stream;
  status.connected = engine_up_.load();
  status.published = published_.load();
  status.applied = applied_.load();
  status.dropped = dropped_.load();
  status.queued = outbox_.waiting();
  std::lock_guard lock(status_mutex_);
  status.last_applied_id = last_id_;
  status.peers = peers_.status(monotonic_now_ms());
  return status;
}

template <class Encode>
void Cluster::enqueue(MessageKind kind, Encode encode) {
  const bool queued = outbox_.push([&](std::string& buffer) {
    encode_header(buffer, kind, unix_now_ms(), replica_id_, incarnation_);
    encode(buffer);
  });
  if (!queued) {
    dropped_.fetch_add(1, std::memory_order_relaxed);
    stats_.dropped(DropReason::queue_full);
  }
}

namespace {

// The session key as the session table stores it: a key longer than the
// table keeps is sent as its hash (an allocation, for such keys only), so
// every replica names the session alike and no message is truncated.
template <class Use>
void with_table_key(std::string_view key, Use use) {
  if (key.size() <= route::kMaxKeyBytes) {
    use(key);
  } else {
    const auto stored = route::session_table_key(key);
    use(std::string_view(stored));
  }
}

}  // namespace

void Cluster::turn(std::string_view model, std::string_view full_key, std::string_view key_source,
                   const route::PeerTurn& turn, bool retry) {
  with_table_key(full_key, [&](std::string_view key) { publish_turn(model, key, key_source, turn, retry); });
}

void Cluster::publish_turn(std::string_view model, std::string_view key, std::string_view key_source,
                           const route::PeerTurn& turn, bool retry) {
  enqueue(MessageKind::turn, [&](std::string& buffer) {
    TurnMessage message{model,
                        key,
                        key_source,
                        turn.number,
                        turn.worker,
                        turn.prefill_worker,
                        turn.reason,
                        turn.prefill,
                        turn.input_tokens,
                        turn.predicted_cached_tokens,
                        turn.kv_usage,
                        retry};
    encode(buffer, message);
  });
}

void Cluster::outcome(std::string_view model, std::string_view full_key, std::uint64_t number,
                      const route::SessionTable::Outcome& outcome) {
  with_table_key(full_key, [&](std::string_view key) {
    enqueue(MessageKind::outcome, [&](std::string& buffer) {
      encode(buffer, OutcomeMessage{model, key, number, outcome.status, outcome.cached_tokens, outcome.prompt_tokens,
                                    outcome.ttft_ms, outcome.decode_ms});
    });
  });
}

void Cluster::assumed(std::string_view model, std::string_view worker, std::span<const std::uint64_t> blocks,
                      std::uint64_t ticket) {
  enqueue(MessageKind::assumed,
          [&](std::string& buffer) { encode_blocks(buffer, model, worker, ticket, blocks.data(), blocks.size()); });
}

void Cluster::withdrawn(std::string_view model, std::string_view worker, std::span<const std::uint64_t> blocks,
                        std::uint64_t ticket) {
  enqueue(MessageKind::withdrawn,
          [&](std::string& buffer) { encode_blocks(buffer, model, worker, ticket, blocks.data(), blocks.size()); });
}

void Cluster::finished(std::string_view model, std::string_view worker, std::uint64_t ticket) {
  enqueue(MessageKind::finished, [&](std::string& buffer) { encode(buffer, FinishedMessage{model, worker, ticket}); });
}

void Cluster::learned(std::string_view model, std::string_view worker, const route::CostSample& sample) {
  enqueue(MessageKind::learned, [&](std::string& buffer) { encode(buffer, LearnedMessage{model, worker, sample}); });
}

void Cluster::answered(std::string_view full_key, std::uint64_t number, std::optional<std::uint32_t> answer_tokens) {
  with_table_key(full_key, [&](std::string_view key) {
    enqueue(MessageKind::answered, [&](std::string& buffer) {
      encode(buffer, AnsweredMessage{key, number, answer_tokens});
    });
  });
}

// The reader's connection is the engine's state of record (a read is
// always pending on it, so a loss shows within a read's block time); the
// publisher reconnects on its own and counts what it could not send.
void Cluster::engine_changed(bool up, std::string_view detail) {
  engine_up_.store(up);
  stats_.set_connected(up);
  if (!up && !engine_reported_down_.exchange(true)) {
    spdlog::warn("cluster: {} unreachable ({}); routing on this replica's own state until it returns", url_text_,
                 detail);
  } else if (up && engine_reported_down_.exchange(false)) {
    spdlog::info("cluster: {} reachable again; publishing and applying resume", url_text_);
  }
}

void Cluster::publish_loop() {
  Connection connection;
  std::vector<std::uint32_t> slots;
  slots.reserve(options_.queue);
  const std::string maxlen = std::to_string(options_.max_stream_entries);
  std::string load_buffer;
  LoadMessage load;
  std::vector<std::uint64_t> last_counts;
  std::vector<std::uint64_t> counts;
  std::uint64_t last_load_ms = 0;
  auto next_attempt = std::chrono::steady_clock::time_point{};
  const auto interval = std::chrono::milliseconds(options_.load_interval.count());

  // XADD key MAXLEN ~ N * m <bytes>
  auto append = [&](std::string_view bytes) {
    std::array<const char*, 8> argv{"XADD",      options_.stream.c_str(), "MAXLEN", "~", maxlen.c_str(), "*", "m",
                                    bytes.data()};
    std::array<std::size_t, 8> lengths{4, options_.stream.size(), 6, 1, maxlen.size(), 1, 1, bytes.size()};
    return redisAppendCommandArgv(connection.get(), static_cast<int>(argv.size()), argv.data(), lengths.data()) ==
           REDIS_OK;
  };

  while (!stopping_.load()) {
    // Without the engine the messages wait in the outbox (bounded: when it
    // is full, new ones are dropped and counted), and go out in order when
    // it returns: a short outage loses nothing.
    if (!connection) {
      const auto now = std::chrono::steady_clock::now();
      if (now >= next_attempt) {
        std::string error;
        connection = connect(options_.url, 1'000ms, error);
        next_attempt = now + kPublishRetry;
      }
      if (!connection) {
        std::this_thread::sleep_for(std::min<std::chrono::milliseconds>(interval, kPublishRetry));
        continue;
      }
    }
    outbox_.take(slots, interval);
    if (stopping_.load()) {
      outbox_.give_back(slots);
      break;
    }
    // This replica's own counts per worker (each worker once).
    const auto table = tables_.load();
    load.workers.clear();
    counts.clear();
    if (table) {
      for (const auto& model : table->models) {
        for (const auto& worker : model.workers) {
          const auto& counters = worker.state->load();
          load.workers.push_back({worker.state->id(), counters.in_flight(), counters.pending_prefill_tokens(),
                                  counters.pending_requests(), counters.active_tokens()});
          counts.insert(counts.end(), {counters.in_flight(), counters.pending_prefill_tokens(),
                                       counters.pending_requests(), counters.active_tokens()});
        }
      }
    }
    // The counts go out when they changed: with the batch they changed for
    // (an outcome's peers then see the request ended when they see the
    // outcome), or after load_interval; unchanged, often enough for the
    // peers to tell this replica is alive.
    const auto now_ms = monotonic_now_ms();
    const auto heartbeat_ms = static_cast<std::uint64_t>(options_.peer_timeout.count()) / 3;
    const bool load_due =
        counts != last_counts
            ? !slots.empty() || now_ms >= last_load_ms + static_cast<std::uint64_t>(options_.load_interval.count())
            : now_ms >= last_load_ms + heartbeat_ms;
    // The load report first: a peer that has applied a batch's messages
    // has applied the counts taken after them.
    std::size_t appended = 0;
    bool ok = true;
    if (load_due) {
      load_buffer.clear();
      encode_header(load_buffer, MessageKind::load, unix_now_ms(), replica_id_, incarnation_);
      encode(load_buffer, load);
      ok = append(load_buffer);
      appended += ok ? 1 : 0;
    }
    for (auto slot : slots) {
      ok = ok && append(outbox_.buffer(slot));
      appended += ok ? 1 : 0;
    }
    std::string error;
    std::size_t confirmed = 0;
    std::size_t replies = 0;  // answered, confirmed or refused
    for (std::size_t index = 0; ok && index < appended; ++index) {
      void* raw = nullptr;
      if (redisGetReply(connection.get(), &raw) != REDIS_OK) {
        ok = false;
        error = connection->errstr;
        break;
      }
      ++replies;
      Reply reply(static_cast<redisReply*>(raw));
      if (reply && reply->type == REDIS_REPLY_ERROR) {
        // The engine refused it (e.g. the key holds another type): counted,
        // the connection stays.
        error = text_of(reply.get());
        stats_.dropped(DropReason::engine_down);
        dropped_.fetch_add(1, std::memory_order_relaxed);
        continue;
      }
      ++confirmed;
      if (load_due && index == 0) {
        stats_.published(MessageKind::load);
        last_counts = counts;
        last_load_ms = now_ms;
      } else {
        const auto slot = slots[index - (load_due ? 1 : 0)];
        stats_.published(static_cast<MessageKind>(static_cast<std::uint8_t>(outbox_.buffer(slot)[3])));
      }
    }
    published_.fetch_add(confirmed, std::memory_order_relaxed);
    if (!ok) {
      // What the engine did not confirm goes out again on the next
      // connection (a peer ignores a duplicate turn; inserts are idempotent).
      const auto sent = std::min(slots.size(), replies > (load_due ? 1U : 0U) ? replies - (load_due ? 1 : 0) : 0);
      outbox_.requeue(std::span(slots).subspan(sent));
      slots.resize(sent);
      spdlog::debug("cluster: publishing to {} failed: {}", url_text_,
                    error.empty() ? std::string(connection->errstr) : error);
      connection.reset();
      next_attempt = std::chrono::steady_clock::now() + kPublishRetry;
    }
    outbox_.give_back(slots);
  }
}

void Cluster::read_loop() {
  Connection connection;
  bool positioned = false;  // last_id_ placed against the stream's own IDs
  std::uint64_t last_sums_ms = 0;
  const std::string count = std::to_string(kReadCount);
  const std::string block = std::to_string(kReadBlockMs);
  while (!stopping_.load()) {
    if (!connection) {
      std::string error;
      connection = connect(options_.url, std::chrono::milliseconds(kReadBlockMs + 2'000), error);
      // Connected is not reachable: a server going down may still accept
      // (its backlog). It is up once it answers.
      if (connection) {
        Reply pong(static_cast<redisReply*>(redisCommand(connection.get(), "PING")));
        if (!pong || text_of(pong.get()) != "PONG") {
          error = pong ? std::string(text_of(pong.get())) : std::string(connection->errstr);
          connection.reset();
        }
      }
      if (!connection) {
        engine_changed(false, error);
        apply_peer_counts(monotonic_now_ms());
        for (int waited = 0; waited < 5 && !stopping_.load(); ++waited) {
          std::this_thread::sleep_for(kReconnectDelay / 5);
        }
        continue;
      }
      engine_changed(true, {});
      // Where to read from, on the stream's own clock (Redis stamps its
      // IDs): at start, catch_up before its newest entry; on a reconnect,
      // after the last entry applied, unless the stream is now behind it
      // (Redis lost its data and a new stream began): then from its start.
      Reply newest(static_cast<redisReply*>(
          redisCommand(connection.get(), "XREVRANGE %b + - COUNT 1", options_.stream.data(), options_.stream.size())));
      std::optional<StreamId> head;
      if (newest && newest->type == REDIS_REPLY_ARRAY && newest->elements == 1 &&
          newest->element[0]->type == REDIS_REPLY_ARRAY && newest->element[0]->elements == 2) {
        head = parse_stream_id(text_of(newest->element[0]->element[0]));
      }
      std::lock_guard lock(status_mutex_);
      if (!positioned) {
        const auto back = static_cast<std::uint64_t>(options_.catch_up.count());
        last_id_ = head ? id_at(head->ms > back ? head->ms - back : 0) : "0-0";
        positioned = true;
      } else if (const auto last = parse_stream_id(last_id_); !head || !last || *head < *last) {
        spdlog::info(
            "cluster: stream {} is behind the last entry applied (the engine lost its data); reading it "
            "from its start",
            options_.stream);
        last_id_ = "0-0";
      }
    }
    std::string after;
    {
      std::lock_guard lock(status_mutex_);
      after = last_id_;
    }
    std::array<const char*, 8> argv{"XREAD",       "COUNT",   count.c_str(),           "BLOCK",
                                    block.c_str(), "STREAMS", options_.stream.c_str(), after.c_str()};
    std::array<std::size_t, 8> lengths{5, 5, count.size(), 5, block.size(), 7, options_.stream.size(), after.size()};
    Reply reply(static_cast<redisReply*>(
        redisCommandArgv(connection.get(), static_cast<int>(argv.size()), argv.data(), lengths.data())));
    if (!reply) {
      engine_changed(false, connection->errstr);
      connection.reset();
      std::this_thread::sleep_for(kReconnectDelay / 5);
      continue;
    }
    if (reply->type == REDIS_REPLY_ERROR) {
      spdlog::warn("cluster: reading {} failed: {}", options_.stream, text_of(reply.get()));
      std::this_thread::sleep_for(kReconnectDelay);
      continue;
    }
    const auto now_ms = monotonic_now_ms();
    const auto unix_ms = unix_now_ms();
    // [[stream, [[id, [field, value, ...]], ...]]]; nil when nothing came.
    if (reply->type == REDIS_REPLY_ARRAY && reply->elements > 0 && reply->element[0]->type == REDIS_REPLY_ARRAY &&
        reply->element[0]->elements == 2 && reply->element[0]->element[1]->type == REDIS_REPLY_ARRAY) {
      const auto* entries = reply->element[0]->element[1];
      std::string newest;
      for (std::size_t index = 0; index < entries->elements; ++index) {
        const auto* entry = entries->element[index];
        if (entry->type != REDIS_REPLY_ARRAY || entry->elements != 2) {
          continue;
        }
        newest = std::string(text_of(entry->element[0]));
        const auto* fields = entry->element[1];
        bool found = false;
        for (std::size_t field = 0; fields->type == REDIS_REPLY_ARRAY && field + 1 < fields->elements; field += 2) {
          if (text_of(fields->element[field]) == "m") {
            apply(text_of(fields->element[field + 1]), now_ms, unix_ms);
            found = true;
          }
        }
        if (!found) {
          dropped_.fetch_add(1, std::memory_order_relaxed);
          stats_.dropped(DropReason::malformed);
        }
      }
      if (!newest.empty()) {
        std::lock_guard lock(status_mutex_);
        last_id_ = newest;
      }
      // Back-pressure: the index writer's queue holds at most one batch of
      // the peers' inserts (a flood waits in Redis, bounded by its trim).
      if (index_writer_ != nullptr && entries->elements > 0) {
        index_writer_->settle(std::chrono::seconds(1));
      }
    }
    if (now_ms >= last_sums_ms + static_cast<std::uint64_t>(options_.load_interval.count())) {
      apply_peer_counts(now_ms);
      last_sums_ms = now_ms;
    }
  }
  // Alone again: the peers' counts no longer count.
  std::lock_guard lock(status_mutex_);
  peers_ = PeerTable(static_cast<std::uint64_t>(options_.peer_timeout.count()));
  if (auto table = tables_.load()) {
    for (const auto& state : table->all_workers()) {
      state->load().set_peer_counts({});
    }
  }
}

void Cluster::apply(std::string_view bytes, std::uint64_t now_ms, std::uint64_t unix_ms) {
  auto decoded = decode(bytes);
  if (!decoded) {
    dropped_.fetch_add(1, std::memory_order_relaxed);
    stats_.dropped(decoded.error());
    return;
  }
  const auto& message = *decoded;
  // Its own, read back; but what a former process of the same replica id
  // published is caught up like a peer's (its load reports excepted: that
  // process is gone).
  const bool own = message.from == replica_id_;
  if (own && (message.incarnation == incarnation_ || message.kind == MessageKind::load)) {
    return;
  }
  const auto lag_ms = unix_ms > message.sent_unix_ms ? unix_ms - message.sent_unix_ms : 0;
  const auto peer_timeout = static_cast<std::uint64_t>(options_.peer_timeout.count());
  // Catching up: what is older than a peer's silence says nothing of now.
  if (message.kind == MessageKind::load && lag_ms > peer_timeout) {
    dropped_.fetch_add(1, std::memory_order_relaxed);
    stats_.dropped(DropReason::stale);
    return;
  }
  const auto table = tables_.load();
  if (!table) {
    return;
  }
  // The routing time of a peer's message on this replica's clock.
  const auto at_ms = now_ms > lag_ms ? now_ms - lag_ms : 0;
  auto worker_of = [&](std::string_view model_name,
                       std::string_view worker_id) -> std::pair<const route::ModelRoute*, std::size_t> {
    const auto* model = table->find_model(model_name);
    if (model == nullptr) {
      return {nullptr, 0};
    }
    return {model, model->find_worker(worker_id)};
  };
  bool applied = true;
  bool load_reported = false;
  std::optional<DropReason> refused;
  std::visit(
      [&](const auto& body) {
        using Body = std::decay_t<decltype(body)>;
        if constexpr (std::is_same_v<Body, TurnMessage>) {
          const auto [model, position] = worker_of(body.model, body.worker);
          if (model == nullptr || position >= model->workers.size()) {
            refused = model == nullptr ? DropReason::unknown_model : DropReason::unknown_worker;
            return;
          }
          route::SessionTurn turn;
          turn.number = body.number;
          turn.at_ms = at_ms;
          turn.worker = std::string(body.worker);
          turn.worker_position = static_cast<std::uint32_t>(position);
          turn.reason = body.reason;
          turn.prefill_worker = std::string(body.prefill_worker);
          turn.prefill = body.prefill;
          turn.input_tokens = body.input_tokens;
          turn.predicted_cached_tokens = body.predicted_cached_tokens;
          turn.kv_usage = body.kv_usage;
          applied = sessions_.apply_peer_turn(body.key, std::move(turn), now_ms, body.retry, body.key_source);
        } else if constexpr (std::is_same_v<Body, OutcomeMessage>) {
          sessions_.record_outcome(body.key, body.number,
                                   {body.status, body.cached_tokens, body.prompt_tokens, body.ttft_ms, body.decode_ms});
        } else if constexpr (std::is_same_v<Body, AnsweredMessage>) {
          sessions_.record_answer(body.key, body.number, body.answer_tokens, at_ms);
        } else if constexpr (std::is_same_v<Body, BlocksMessage>) {
          const auto [model, position] = worker_of(body.model, body.worker);
          if (model == nullptr || position >= model->workers.size()) {
            refused = model == nullptr ? DropReason::unknown_model : DropReason::unknown_worker;
            return;
          }
          if (index_writer_ == nullptr || body.blocks.empty()) {
            return;
          }
          const auto ticket = peer_ticket(message.from, body.ticket);
          if (message.kind == MessageKind::assumed) {
            index_writer_->assume(model->cache, model->workers[position].slot, body.blocks, ticket);
          } else {
            index_writer_->withdraw(model->cache, model->workers[position].slot, body.blocks, ticket);
          }
        } else if constexpr (std::is_same_v<Body, FinishedMessage>) {
          const auto [model, position] = worker_of(body.model, body.worker);
          if (model == nullptr || position >= model->workers.size()) {
            refused = model == nullptr ? DropReason::unknown_model : DropReason::unknown_worker;
            return;
          }
          if (index_writer_ != nullptr &&
              model->workers[position].options.cache_model == config::CacheModel::sequences) {
            index_writer_->finish(model->cache, model->workers[position].slot, peer_ticket(message.from, body.ticket),
                                  std::nullopt);
          }
        } else if constexpr (std::is_same_v<Body, LearnedMessage>) {
          const auto [model, position] = worker_of(body.model, body.worker);
          if (model == nullptr || position >= model->workers.size()) {
            refused = model == nullptr ? DropReason::unknown_model : DropReason::unknown_worker;
            return;
          }
          route::learn_costs(*model, position, body.sample, table->options->routing.cache_aware);
        } else {
          {
            std::lock_guard lock(status_mutex_);
            peers_.report_load(message.from, body, now_ms);
          }
          load_reported = true;
        }
      },
      message.body);
  if (load_reported) {
    apply_peer_counts(now_ms);
  }
  std::lock_guard lock(status_mutex_);
  if (!own) {
    peers_.heard(message.from, now_ms, static_cast<double>(lag_ms));
  }
  if (refused) {
    dropped_.fetch_add(1, std::memory_order_relaxed);
    stats_.dropped(*refused);
    if (!own) {
      peers_.dropped(message.from);
    }
    return;
  }
  // Catching up at start is not lag: only what was sent since.
  if (message.sent_unix_ms >= started_unix_ms_) {
    stats_.lag(static_cast<double>(lag_ms) / 1'000.0);
  }
  if (applied) {
    applied_.fetch_add(1, std::memory_order_relaxed);
    stats_.applied(message.kind);
    if (!own) {
      peers_.applied(message.from);
    }
  }
}

void Cluster::apply_peer_counts(std::uint64_t now_ms) {
  PeerTable::Sums sums;
  std::size_t live = 0;
  {
    std::lock_guard lock(status_mutex_);
    for (const auto& id : peers_.newly_silent(now_ms)) {
      spdlog::warn("cluster: peer {} silent for {} ms; its requests in flight no longer count", id,
                   options_.peer_timeout.count());
    }
    sums = peers_.sums(now_ms);
    live = peers_.live(now_ms);
  }
  stats_.set_peers(live);
  const auto table = tables_.load();
  if (!table) {
    return;
  }
  for (const auto& model : table->models) {
    for (const auto& worker : model.workers) {
      const auto found = sums.find(worker.state->id());
      worker.state->load().set_peer_counts(found != sums.end() ? found->second : workers::LoadCounters::PeerCounts{});
    }
  }
}

}  // namespace kvgate::cluster
