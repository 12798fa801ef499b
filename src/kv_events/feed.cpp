#include "feed.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <atomic>
#include <chrono>

#include "kvgate/core/clock.hpp"

namespace kvgate::kv_events {
namespace {

// Bound on one feed's work per wake-up.
constexpr int kMaxMessagesPerReceive = 4096;

std::optional<std::uint64_t> read_sequence(const zmq::message_t& frame) {
  if (frame.size() != 8) {
    return std::nullopt;
  }
  const auto* bytes = static_cast<const unsigned char*>(frame.data());
  std::uint64_t value = 0;
  for (int index = 0; index < 8; ++index) {
    value = (value << 8) | bytes[index];
  }
  return value;
}

std::string sequence_bytes(std::uint64_t value) {
  std::string bytes(8, '\0');
  for (int index = 7; index >= 0; --index) {
    bytes[static_cast<std::size_t>(index)] = static_cast<char>(value & 0xFF);
    value >>= 8;
  }
  return bytes;
}

// Reads one multipart message without blocking; empty when none is waiting.
std::optional<std::vector<zmq::message_t>> receive_multipart(zmq::socket_t& socket) {
  std::vector<zmq::message_t> frames;
  zmq::message_t frame;
  if (!socket.recv(frame, zmq::recv_flags::dontwait)) {
    return std::nullopt;
  }
  frames.push_back(std::move(frame));
  while (socket.get(zmq::sockopt::rcvmore) != 0) {
    zmq::message_t more;
    (void)socket.recv(more, zmq::recv_flags::none);  // the rest of a multipart message is already here
    frames.push_back(std::move(more));
  }
  return frames;
}

void configure_reconnect(zmq::socket_t& socket) {
  socket.set(zmq::sockopt::linger, 0);
  socket.set(zmq::sockopt::reconnect_ivl, 100);       // ms; first retry
  socket.set(zmq::sockopt::reconnect_ivl_max, 5000);  // ms; exponential back-off up to this
}

}  // namespace

Feed::Feed(zmq::context_t& context, IndexStats& stats, WorkerFeed config, FeedSettings settings, std::uint64_t now_ms)
    : context_(context),
      stats_(stats),
      config_(std::move(config)),
      settings_(settings),
      status_(config_.worker->event_stream()),
      worker_id_(config_.worker->id()),
      tracker_(sequence_settings(), now_ms),
      stored_events_(&config_.worker->series().kv_events(obs::KvEventType::block_stored)),
      removed_events_(&config_.worker->series().kv_events(obs::KvEventType::block_removed)),
      cleared_events_(&config_.worker->series().kv_events(obs::KvEventType::all_blocks_cleared)),
      unknown_events_(&config_.worker->series().kv_events(obs::KvEventType::unknown)),
      malformed_events_(&config_.worker->series().kv_events(obs::KvEventType::malformed)) {
  status_.connected = false;
  status_.stale = false;
  status_.silent = false;
  status_.last_sequence = -1;
  engine_restarts_seen_ = config_.worker->engine().restarts();
  configure_cache_model();
  if (!events_on()) {
    return;
  }
  if (on_listener()) {
    // The engine dials the gateway: no socket of this worker's own; the
    // listener hands over its messages (deliver).
    open_replay_socket();
    spdlog::info("kv events: worker {} publishes to kv_events.listen (topic kv@{}@<model>)", worker_id_,
                 config_.listener_addresses.empty() ? std::string("?") : config_.listener_addresses.front());
    return;
  }
  static std::atomic<std::uint64_t> monitor_number{0};
  subscriber_.emplace(context_, zmq::socket_type::sub);
  configure_reconnect(*subscriber_);
  subscriber_->set(zmq::sockopt::subscribe, "");
  auto monitor_address = "inproc://kvgate-kv-monitor-" + std::to_string(monitor_number++);
  zmq_socket_monitor(subscriber_->handle(), monitor_address.c_str(), ZMQ_EVENT_CONNECTED | ZMQ_EVENT_DISCONNECTED);
  monitor_.emplace(context_, zmq::socket_type::pair);
  monitor_->set(zmq::sockopt::linger, 0);
  monitor_->connect(monitor_address);
  subscriber_->connect(config_.events_endpoint);
  open_replay_socket();
  spdlog::info("kv events: worker {} subscribing to {}{}", worker_id_, config_.events_endpoint,
               config_.replay_endpoint.empty() ? "" : " (replay " + config_.replay_endpoint + ")");
}

Feed::~Feed() {
  if (subscriber_) {
    zmq_socket_monitor(subscriber_->handle(), nullptr, 0);
  }
}

void Feed::open_replay_socket() {
  replay_.reset();
  if (config_.replay_endpoint.empty()) {
    return;
  }
  replay_.emplace(context_, zmq::socket_type::dealer);
  configure_reconnect(*replay_);
  replay_->connect(config_.replay_endpoint);
}

bool Feed::same_source(const WorkerFeed& other) const {
  return other.worker == config_.worker && other.events_endpoint == config_.events_endpoint &&
         other.listener_addresses == config_.listener_addresses && other.replay_endpoint == config_.replay_endpoint;
}

void Feed::update(const WorkerFeed& other, FeedSettings settings) {
  config_.configured_capacity_blocks = other.configured_capacity_blocks;
  config_.default_capacity_blocks = other.default_capacity_blocks;
  config_.sequence_slots = other.sequence_slots;
  config_.slot_similarity = other.slot_similarity;
  config_.slot_ram_blocks = other.slot_ram_blocks;
  config_.adapters = other.adapters;
  settings_ = settings;
  configure_cache_model();
  tracker_.update(sequence_settings());
}

SequenceSettings Feed::sequence_settings() const {
  SequenceSettings settings;
  settings.replay_available = !config_.replay_endpoint.empty();
  settings.replay_timeout_ms = static_cast<std::uint64_t>(settings_.replay_timeout_ms);
  settings.approximate_ttl_ms = static_cast<std::uint64_t>(settings_.approximate_ttl_ms);
  settings.silence_after_ms = static_cast<std::uint64_t>(settings_.silence_after_ms);
  return settings;
}

void Feed::add_poll_items(std::vector<zmq::pollitem_t>& items) {
  for (auto* socket :
       {subscriber_ ? &*subscriber_ : nullptr, monitor_ ? &*monitor_ : nullptr, replay_ ? &*replay_ : nullptr}) {
    if (socket != nullptr) {
      items.push_back({socket->handle(), 0, ZMQ_POLLIN, 0});
    }
  }
}

void Feed::receive(std::uint64_t now_ms) {
  if (!events_on()) {
    return;
  }
  if (on_listener()) {
    receive_replay(now_ms);
    return;
  }
  receive_monitor();
  receive_replay(now_ms);
  receive_live(now_ms);
}

void Feed::receive_monitor() {
  while (auto frames = receive_multipart(*monitor_)) {
    if (frames->empty() || (*frames)[0].size() < 2) {
      continue;
    }
    std::uint16_t event = 0;
    std::memcpy(&event, (*frames)[0].data(), sizeof event);
    if (event == ZMQ_EVENT_CONNECTED) {
      status_.connected = true;
      spdlog::info("kv events: worker {} connected to {}", worker_id_, config_.events_endpoint);
    } else if (event == ZMQ_EVENT_DISCONNECTED) {
      status_.connected = false;
      tracker_.on_disconnected();
      spdlog::warn("kv events: worker {} lost its publisher {}; reconnecting", worker_id_, config_.events_endpoint);
    }
  }
}

void Feed::receive_live(std::uint64_t now_ms) {
  for (int count = 0; count < kMaxMessagesPerReceive; ++count) {
    auto frames = receive_multipart(*subscriber_);
    if (!frames) {
      return;
    }
    live_message(*frames, now_ms);
  }
}

void Feed::deliver(std::vector<zmq::message_t>& frames, std::uint64_t now_ms) {
  if (!status_.connected.exchange(true)) {
    // No connection of its own to watch: its first message says it is there.
    spdlog::info("kv events: worker {} publishes to the listener", worker_id_);
  }
  receive_replay(now_ms);
  live_message(frames, now_ms);
}

void Feed::live_message(std::vector<zmq::message_t>& frames, std::uint64_t now_ms) {
  // [topic, sequence (8 bytes, big-endian), payload]
  auto sequence = frames.size() == 3 ? read_sequence(frames[1]) : std::nullopt;
  if (!sequence) {
    ++status_.decode_errors;
    config_.worker->series().kv_event_decode_error();
    return;
  }
  perform(tracker_.on_live({*sequence, frames[2].to_string()}, now_ms), now_ms);
}

void Feed::send_replay_request(std::uint64_t from) {
  ++status_.replays;
  auto start = sequence_bytes(from);
  replay_->send(zmq::const_buffer("", 0), zmq::send_flags::sndmore | zmq::send_flags::dontwait);
  replay_->send(zmq::buffer(start), zmq::send_flags::dontwait);
}

void Feed::receive_replay(std::uint64_t now_ms) {
  if (!replay_) {
    return;
  }
  for (int count = 0; count < kMaxMessagesPerReceive; ++count) {
    auto frames = receive_multipart(*replay_);
    if (!frames) {
      return;
    }
    if (!tracker_.replaying()) {
      continue;  // a late answer to a replay already given up
    }
    // ["", topic, seq, payload] (newer vLLM) or ["", seq, payload] (older
    // vLLM, SGLang).
    std::optional<std::uint64_t> sequence;
    if (frames->size() == 4 || frames->size() == 3) {
      sequence = read_sequence((*frames)[frames->size() - 2]);
    }
    if (!sequence) {
      ++status_.decode_errors;
      config_.worker->series().kv_event_decode_error();
      continue;
    }
    perform(tracker_.on_replay({*sequence, frames->back().to_string()}, now_ms), now_ms);
  }
}

void Feed::perform(SequenceActions actions, std::uint64_t now_ms) {
  using Kind = SequenceAction::Kind;
  for (auto& action : actions) {
    switch (action.kind) {
      case Kind::apply:
        apply(action.message, now_ms);
        break;
      case Kind::gap:
        ++status_.gaps;
        config_.worker->series().kv_event_gap();
        spdlog::warn("kv events: worker {} sequence gap: expected {}, got {}", worker_id_, action.expected, action.got);
        break;
      case Kind::engine_restarted:
        restart_seen_in_events_ = true;  // the metrics' sign of it, when it comes, is this restart
        ++status_.resets;
        config_.worker->series().kv_event_reset();
        spdlog::warn("kv events: worker {} restarted (sequence went back); its index entries were dropped", worker_id_);
        config_.cache->caches.drop_worker(config_.slot);
        status_.last_sequence = -1;
        break;
      case Kind::request_replay:
        send_replay_request(action.expected);
        break;
      case Kind::replay_finished:
        finished_replay(action);
        break;
      case Kind::reopen_replay_socket:
        open_replay_socket();
        break;
      case Kind::stale_started:
        config_.cache->caches.forget_confirmed(config_.slot);
        if (!status_.stale.exchange(true)) {
          spdlog::warn("kv events: worker {} is stale; approximate routing until its events rebuild the index",
                       worker_id_);
        }
        break;
      case Kind::stale_ended:
        status_.stale = false;
        spdlog::info("kv events: worker {} is no longer stale", worker_id_);
        break;
      case Kind::silent_started:
        status_.silent = true;
        spdlog::error(
            "kv events: worker {} got traffic but sent no KV event for {} ms; check the engine's "
            "--kv-events-config and {}",
            worker_id_, settings_.silence_after_ms, config_.events_endpoint);
        break;
      case Kind::silent_ended:
        status_.silent = false;
        spdlog::info("kv events: worker {} is sending events again", worker_id_);
        break;
    }
  }
}

void Feed::finished_replay(const SequenceAction& finished) {
  if (finished.timed_out) {
    spdlog::warn("kv events: worker {} replay timed out", worker_id_);
  }
  config_.worker->series().kv_event_replay(finished.closed);
  if (finished.closed) {
    spdlog::info("kv events: worker {} replay closed the gap", worker_id_);
    return;
  }
  ++status_.failed_replays;
  if (finished.late_join) {
    spdlog::info("kv events: worker {} joined late; blocks stored before the replay buffer are unknown", worker_id_);
    return;
  }
  spdlog::warn("kv events: worker {} replay could not close the gap", worker_id_);
}

void Feed::apply(const EventMessage& message, std::uint64_t now_ms) {
  status_.last_sequence = static_cast<std::int64_t>(message.sequence);
  ++status_.batches;
  auto batch = decode_batch(message.payload);
  if (!batch) {
    ++status_.decode_errors;
    config_.worker->series().kv_event_decode_error();
    spdlog::warn("kv events: worker {} batch {} undecodable: {}", worker_id_, message.sequence, batch.error().message);
    return;
  }
  for (const auto& event : batch->events) {
    (std::holds_alternative<BlockStored>(event)    ? stored_events_
     : std::holds_alternative<BlockRemoved>(event) ? removed_events_
                                                   : cleared_events_)
        ->Increment();
  }
  unknown_events_->Increment(batch->unknown_events);
  malformed_events_->Increment(batch->malformed_events);
  drop_unknown_adapters(batch->events);
  auto& attention = config_.cache->attention;
  const auto reported_before = attention.reported();
  auto stats = config_.cache->caches.apply(config_.slot, *batch, now_ms);
  if (const auto reported = attention.reported(); reported && reported != reported_before) {
    const auto configured = attention.configured();
    spdlog::info("kv events: model {}: worker {}'s cache groups are {}{}", config_.cache->name, worker_id_,
                 reported->hybrid() ? "full attention and " + prefix::to_string(*reported) : "full attention only",
                 *reported == configured
                     ? ""
                     : " (configured: " + prefix::to_string(configured) + "; the events' layout is used)");
  }
  if (stats.unknown_group_blocks > 0) {
    config_.worker->series().index_unindexable(stats.unknown_group_blocks);
    if (!unknown_group_logged_) {
      unknown_group_logged_ = true;
      spdlog::warn(
          "kv events: worker {} sends blocks of cache group {}{} that kvgate does not model; they are "
          "counted in kvgate_index_unindexable_blocks_total and not indexed (a group without a kind "
          "is the local attention of models[].attention when set; logged once)",
          worker_id_, stats.unknown_group.value_or(0),
          stats.unknown_group_kind.empty() ? std::string() : " (" + stats.unknown_group_kind + ")");
    }
  }
  status_.evicted_blocks.fetch_add(stats.gpu_evicted_blocks, std::memory_order_relaxed);
  if (stats.evicted_entries > 0) {
    stats_.evictions.Increment(static_cast<double>(stats.evicted_entries));
  }
  if (stats.unindexable_blocks > 0) {
    config_.worker->series().index_unindexable(stats.unindexable_blocks);
  }
  if (stats.over_limit) {
    spdlog::error("kv events: worker {} reported more blocks than any engine holds; its entries were reset",
                  worker_id_);
  }
  status_.last_event_unix_ms = unix_now_ms();
}

// Blocks stored under a LoRA adapter the model does not list: no request
// can name it (it is a 404), so they are counted, logged once, and not
// indexed. Their removals then count as unknown removals.
void Feed::drop_unknown_adapters(std::vector<Event>& events) {
  std::uint64_t dropped = 0;
  std::erase_if(events, [&](const Event& event) {
    const auto* stored = std::get_if<BlockStored>(&event);
    if (stored == nullptr || !stored->lora_name || stored->lora_name->empty() ||
        std::find(config_.adapters.begin(), config_.adapters.end(), *stored->lora_name) != config_.adapters.end()) {
      return false;
    }
    dropped += stored->block_hashes.size();
    if (!unknown_adapter_logged_) {
      unknown_adapter_logged_ = true;
      spdlog::warn(
          "kv events: worker {} stores blocks for LoRA adapter '{}', which models[].adapters does not list; "
          "they are counted in kvgate_index_unindexable_blocks_total and not indexed (logged once)",
          worker_id_, *stored->lora_name);
    }
    return true;
  });
  if (dropped > 0) {
    config_.worker->series().index_unindexable(dropped);
  }
}

void Feed::assume(std::span<const BlockHash> blocks, std::uint64_t now_ms, std::uint64_t ticket) {
  const bool approximate = !events_on() || tracker_.stale();
  auto ttl = approximate ? settings_.approximate_ttl_ms : settings_.speculative_ttl_ms;
  auto result = config_.cache->caches.assume(config_.slot, blocks, now_ms, static_cast<std::uint64_t>(ttl),
                                             capacity_blocks(), ticket);
  if (result.evicted_entries > 0) {
    stats_.evictions.Increment(static_cast<double>(result.evicted_entries));
  }
  if (events_on()) {
    tracker_.on_routed(result.new_blocks, now_ms);
  }
}

void Feed::withdraw(std::span<const BlockHash> blocks, std::uint64_t ticket, std::uint64_t now_ms) {
  config_.cache->caches.withdraw(config_.slot, blocks, ticket, now_ms);
}

void Feed::finish(std::uint64_t ticket, std::uint64_t now_ms, std::optional<std::uint32_t> reported_blocks) {
  config_.cache->caches.finish(config_.slot, ticket, now_ms, reported_blocks);
}

void Feed::configure_cache_model() {
  // A request still running after the approximate TTL is taken as ended.
  config_.cache->caches.set_sequence_slots(config_.slot, config_.sequence_slots, config_.slot_similarity,
                                           static_cast<std::uint64_t>(settings_.approximate_ttl_ms),
                                           config_.slot_ram_blocks);
}

std::uint64_t Feed::capacity_blocks() const {
  if (config_.configured_capacity_blocks != 0) {
    return config_.configured_capacity_blocks;
  }
  auto scraped = config_.worker->engine().last();
  if (scraped && scraped->load.num_gpu_blocks && *scraped->load.num_gpu_blocks > 0) {
    return *scraped->load.num_gpu_blocks;
  }
  return config_.default_capacity_blocks;
}

void Feed::tick(std::uint64_t now_ms) {
  if (const auto restarts = config_.worker->engine().restarts(); restarts != engine_restarts_seen_) {
    // The engine's counters went down: it restarted and its cache is empty.
    // Without events they are the only sign; with events they catch a
    // restart whose first batches were lost before its publisher connected
    // (sequences can then look like a gap or a continuation).
    engine_restarts_seen_ = restarts;
    if (!events_on()) {
      config_.cache->caches.engine_restarted(config_.slot, now_ms);
      spdlog::info("worker {}: its engine restarted; its modelled cache is emptied but for the requests in flight",
                   worker_id_);
    } else if (on_listener() && !restart_seen_in_events_) {
      // A connected stream sees its publisher go (the socket monitor), so
      // any sequence but the next then means a restart; a worker on the
      // listener has no connection of its own, and the restarted engine's
      // first batches may be lost before its publisher connects: its
      // counters are the sign. Entries it stored since are dropped too
      // (under-reporting only, until it stores them again).
      config_.cache->caches.drop_worker(config_.slot);
      tracker_.on_engine_restarted();
      ++status_.resets;
      config_.worker->series().kv_event_reset();
      status_.last_sequence = -1;
      spdlog::warn(
          "kv events: worker {}'s engine restarted (its metrics' counters went down); its index entries "
          "were dropped",
          worker_id_);
    }
    restart_seen_in_events_ = false;
  }
  if (events_on()) {
    perform(tracker_.on_tick(now_ms), now_ms);
  }
  publish_counts(now_ms);
}

void Feed::publish_counts(std::uint64_t now_ms) {
  const auto& caches = config_.cache->caches;
  status_.engine_blocks = caches.engine_blocks(config_.slot);
  status_.assumed_blocks = caches.assumed_blocks(config_.slot);
  const auto held = caches.gpu_blocks(config_.slot);
  const auto capacity = capacity_blocks();
  if (const auto* slots = caches.sequence_slots(config_.slot)) {
    status_.slots_busy = slots->busy_slots();
    status_.slots_waiting = static_cast<std::uint32_t>(slots->waiting());
  }
  status_.gpu_blocks = held;
  status_.capacity_blocks = capacity;
  // The ages walk one entry per 100 ms of the cache's residency: only worth
  // it when a placement can evict (policy/eviction.hpp).
  policy::AgeHistogram ages{};
  if (held * 2 >= capacity) {
    ages = caches.gpu_block_ages(config_.slot, now_ms);
  }
  for (std::size_t bucket = 0; bucket < ages.size(); ++bucket) {
    status_.gpu_block_ages[bucket].store(ages[bucket], std::memory_order_relaxed);
  }
  status_.gpu_block_ages_ms = monotonic_now_ms();
}

void Feed::drop_entries() {
  config_.cache->caches.drop_worker(config_.slot);
  publish_counts(0);  // nothing left to age
}

}  // namespace kvgate::kv_events
