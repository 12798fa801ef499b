#include "sim_server.hpp"

#include <algorithm>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <iomanip>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>

namespace kvgate::sim {

using namespace kvgate::http;
using namespace boost::asio::experimental::awaitable_operators;

namespace {

// vLLM's TTFT and e2e buckets (a subset), in seconds.
std::vector<double> latency_bounds() {
  return {0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0};
}

std::uint64_t random_seed() {
  std::random_device device;
  return (static_cast<std::uint64_t>(device()) << 32) ^ device();
}

}  // namespace

void SimServer::Histogram::observe(double value) {
  std::size_t bucket = 0;
  while (bucket < bounds.size() && value > bounds[bucket]) {
    ++bucket;
  }
  ++counts[bucket];
  sum += value;
  ++count;
}

SimServer::SimServer(asio::io_context& io, SimOptions options, std::shared_ptr<const prompt::ModelTokenizer> tokenizer)
    : tokenizer_(std::move(tokenizer)),
      io_(io),
      options_(std::move(options)),
      engine_(options_.num_gpu_blocks, options_.block_size, options_.limits, options_.cost),
      base_seed_(options_.hash_seed.value_or(random_seed())) {
  for (auto* histogram : {&ttft_, &e2e_}) {
    histogram->bounds = latency_bounds();
    histogram->counts.assign(histogram->bounds.size() + 1, 0);
  }
  if (!options_.kv_events_endpoint.empty()) {
    publisher_ = std::make_unique<KvPublisher>(PublisherOptions{
        options_.kv_events_endpoint, options_.kv_events_replay_endpoint, options_.replay_buffer_batches,
        options_.kv_events_format == EventFormat::map, options_.kv_events_topic, options_.kv_events_connect});
  }
  wake_.expires_at(std::chrono::steady_clock::time_point::max());
}

Result<tcp::endpoint, std::string> SimServer::bind() {
  error_code error;
  auto address = asio::ip::make_address(options_.host, error);
  if (error) {
    return unexpected("--host must be an IP address");
  }
  return open_listener(acceptor_, tcp::endpoint(address, options_.port), false);
}

void SimServer::start() {
  asio::co_spawn(io_, accept_loop(), [](const std::exception_ptr&) {});
  asio::co_spawn(io_, engine_loop(), [](const std::exception_ptr&) {});
  if (publisher_ && publisher_->replay_fd() >= 0) {
    asio::co_spawn(io_, replay_loop(), [](const std::exception_ptr&) {});
  }
}

// Waits on the replay socket's ZMQ_FD and answers requests on this thread.
awaitable<void> SimServer::replay_loop() {
  asio::posix::stream_descriptor descriptor(io_, publisher_->replay_fd());
  for (;;) {
    publisher_->serve_replay();
    auto [error] = co_await descriptor.async_wait(asio::posix::stream_descriptor::wait_read, use_nothrow);
    if (error) {
      break;
    }
  }
  descriptor.release();  // the fd belongs to ZMQ
}

awaitable<void> SimServer::accept_loop() {
  for (;;) {
    auto [error, socket] = co_await acceptor_.async_accept(use_nothrow);
    if (error == asio::error::operation_aborted) {
      co_return;
    }
    if (!error) {
      // As uvicorn does for vLLM: a stream's header and first event are
      // two small writes, and with Nagle the second waits for the peer's
      // delayed ACK (40 ms on Linux), which would show up as TTFT.
      error_code ignored;
      socket.set_option(tcp::no_delay(true), ignored);
      asio::co_spawn(io_, serve_sim_connection(*this, std::move(socket)), [](const std::exception_ptr&) {});
    }
  }
}

BlockHash SimServer::hash_seed_for(std::string_view cache_salt, std::string_view lora_name) const {
  // The per-process seed keeps these hashes private to this replica, as
  // vLLM's are: nothing downstream can recompute them. An adapter is its own
  // partition, as vLLM puts the adapter in the first block's extra keys.
  return prefix::partition_seed(
      {options_.model, std::to_string(base_seed_) + (lora_name.empty() ? "" : "/lora/") + std::string(lora_name),
       cache_salt});
}

RequestHandle SimServer::submit(NewRequest request, ActiveRequest& state) {
  auto handle = engine_.add(std::move(request));
  active_[handle] = &state;
  wake_.cancel();
  return handle;
}

void SimServer::cancel(RequestHandle handle) {
  active_.erase(handle);
  engine_.abort(handle);
}

void SimServer::record_latency(double ttft_seconds, double e2e_seconds) {
  ttft_.observe(ttft_seconds);
  e2e_.observe(e2e_seconds);
}

double SimServer::model_seconds(std::chrono::steady_clock::duration real) const {
  return std::chrono::duration<double>(real).count() * options_.time_scale;
}

bool SimServer::reset_prefix_cache() {
  if (!engine_.reset_cache()) {
    return false;
  }
  publish_events();
  return true;
}

awaitable<void> SimServer::engine_loop() {
  asio::steady_timer step_timer(io_);
  for (;;) {
    if (engine_.idle()) {
      wake_.expires_at(std::chrono::steady_clock::time_point::max());
      co_await wake_.async_wait(use_nothrow);
      continue;
    }
    auto report = engine_.step();
    // The step's tokens exist only once its modelled GPU time has passed.
    auto real_ms = report.duration_ms * fault_.slow_factor / options_.time_scale;
    busy_seconds_ += real_ms / 1000;
    prefill_seconds_ +=
        options_.cost.prefill_ms_per_token * report.prefill_tokens * fault_.slow_factor / options_.time_scale / 1000;
    step_timer.expires_after(std::chrono::microseconds(static_cast<std::int64_t>(real_ms * 1000)));
    co_await step_timer.async_wait(use_nothrow);
    publish_events();
    auto now = std::chrono::steady_clock::now();
    for (const auto& progress : report.progress) {
      auto found = active_.find(progress.request);
      if (found == active_.end()) {
        continue;  // aborted while the step ran
      }
      auto& state = *found->second;
      state.generated += progress.new_output_tokens;
      state.cached_tokens = progress.cached_tokens;
      if (progress.first_token) {
        state.first_token_at = now;
      }
      if (progress.finished) {
        state.finished = true;
        active_.erase(found);
      }
      state.signal.cancel();
    }
  }
}

void SimServer::publish_events() {
  auto events = engine_.pool().take_events();
  if (!publisher_ || events.empty()) {
    return;
  }
  auto now = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  publisher_->publish(encode_event_batch(events, now, 0, options_.kv_events_format));
}

std::optional<std::string> SimServer::apply_fault(const std::string& body) {
  auto request = nlohmann::json::parse(body, nullptr, false);
  if (!request.is_object() || !request.contains("mode") || !request["mode"].is_string()) {
    return std::string(
        R"(expected {"mode": "none|status|hang|slow|slow_metrics|drop_after|evict_all|drop_batches|restart", ...})");
  }
  auto mode = request["mode"].get<std::string>();
  auto number = [&](const char* key, double fallback) {
    return request.contains(key) && request[key].is_number() ? request[key].get<double>() : fallback;
  };
  if (mode == "none") {
    fault_ = FaultState{};
  } else if (mode == "status") {
    auto status = static_cast<unsigned>(number("status", 500));
    if (status < 400 || status > 599) {
      return std::string("status must be 4xx or 5xx");
    }
    fault_.status = status;
    fault_.status_delay_ms = static_cast<std::uint32_t>(std::clamp(number("delay_ms", 0), 0.0, 600'000.0));
  } else if (mode == "hang") {
    fault_.hang = true;
  } else if (mode == "slow") {
    fault_.slow_factor = std::max(1.0, number("factor", 10));
  } else if (mode == "slow_metrics") {
    fault_.metrics_delay_ms = static_cast<std::uint32_t>(std::clamp(number("delay_ms", 2'000), 0.0, 600'000.0));
  } else if (mode == "drop_after") {
    fault_.drop_after_tokens = static_cast<std::uint32_t>(number("tokens", 1));
  } else if (mode == "evict_all") {
    engine_.pool().evict_free_blocks();
    publish_events();
  } else if (mode == "drop_batches") {
    if (publisher_) {
      publisher_->drop_next(static_cast<std::uint32_t>(number("count", 1)));
    }
  } else if (mode == "restart") {
    restart();
  } else {
    return "unknown mode '" + mode + "'";
  }
  return std::nullopt;
}

// As a crashed and restarted engine: requests in flight fail, the cache is
// empty without any event, and event sequence numbers start again at 0.
void SimServer::restart() {
  for (auto& [handle, state] : active_) {
    state->failed = true;
    state->signal.cancel();
  }
  active_.clear();
  engine_ = Engine(options_.num_gpu_blocks, options_.block_size, options_.limits, options_.cost);
  if (publisher_) {
    publisher_->restart();
  }
  fault_ = FaultState{};
}

SimServer::Room& SimServer::room(std::uint64_t id) {
  auto& entry = rooms_[id];
  if (!entry.signal) {
    entry.signal = std::make_shared<asio::steady_timer>(io_);
    entry.signal->expires_at(std::chrono::steady_clock::time_point::max());
  }
  return entry;
}

void SimServer::open_room(std::uint64_t id) {
  room(id);
}

void SimServer::close_room(std::uint64_t id, std::optional<std::uint32_t> tokens) {
  auto& entry = room(id);
  entry.tokens = tokens;
  entry.closed = true;
  entry.signal->cancel();
  // Bounded: rooms nobody fetches (a decoder that failed) do not pile up.
  constexpr std::size_t kMaxRooms = 100'000;
  if (rooms_.size() > kMaxRooms) {
    for (auto it = rooms_.begin(); it != rooms_.end();) {
      it = it->second.closed ? rooms_.erase(it) : std::next(it);
    }
  }
}

awaitable<std::optional<std::uint32_t>> SimServer::await_room(std::uint64_t id, std::chrono::milliseconds patience) {
  const auto deadline = std::chrono::steady_clock::now() + patience;
  for (;;) {
    auto& entry = room(id);
    if (entry.closed) {
      auto tokens = entry.tokens;
      rooms_.erase(id);
      co_return tokens;
    }
    if (std::chrono::steady_clock::now() >= deadline) {
      co_return std::nullopt;
    }
    // A copy of the timer's owner: the room may be erased while waiting.
    auto signal = entry.signal;
    asio::steady_timer patience_timer(io_, deadline);
    co_await (signal->async_wait(use_nothrow) || patience_timer.async_wait(use_nothrow));
  }
}

std::string SimServer::metrics_text() {
  std::ostringstream out;
  const auto labels = "model_name=\"" + options_.model + "\",engine=\"0\"";
  auto gauge = [&](const char* name, const char* help, double value) {
    out << "# HELP " << name << ' ' << help << "\n# TYPE " << name << " gauge\n"
        << name << '{' << labels << "} " << value << '\n';
  };
  auto counter = [&](const char* name, const char* help, std::uint64_t value) {
    out << "# HELP " << name << ' ' << help << "\n# TYPE " << name << " counter\n"
        << name << '{' << labels << "} " << value << '\n';
  };
  auto histogram = [&](const char* name, const char* help, const Histogram& values) {
    out << "# HELP " << name << ' ' << help << "\n# TYPE " << name << " histogram\n";
    std::uint64_t cumulative = 0;
    for (std::size_t bucket = 0; bucket < values.bounds.size(); ++bucket) {
      cumulative += values.counts[bucket];
      out << name << "_bucket{" << labels << ",le=\"" << values.bounds[bucket] << "\"} " << cumulative << '\n';
    }
    out << name << "_bucket{" << labels << ",le=\"+Inf\"} " << values.count << '\n';
    out << name << "_sum{" << labels << "} " << values.sum << '\n';
    out << name << "_count{" << labels << "} " << values.count << '\n';
  };
  const auto& counters = engine_.counters();
  if (options_.profile == EngineProfile::llamacpp) {
    // llama-server's names (tools/server/server-context.cpp, --metrics):
    // no labels; requests_deferred are those waiting for a free slot.
    auto plain = [&](const char* name, const char* type, const char* help, double value) {
      out << "# HELP " << name << ' ' << help << "\n# TYPE " << name << ' ' << type << '\n'
          << name << ' ' << value << '\n';
    };
    plain("llamacpp:prompt_tokens_total", "counter", "Number of prompt tokens processed.",
          static_cast<double>(counters.prompt_tokens - counters.prefix_hit_tokens));
    plain("llamacpp:prompt_seconds_total", "counter", "Prompt process time", prefill_seconds_);
    plain("llamacpp:tokens_predicted_total", "counter", "Number of generation tokens processed.",
          static_cast<double>(counters.generation_tokens));
    plain("llamacpp:requests_processing", "gauge", "Number of requests processing.",
          static_cast<double>(engine_.running()));
    plain("llamacpp:requests_deferred", "gauge", "Number of requests deferred.",
          static_cast<double>(engine_.waiting()));
  } else if (options_.profile == EngineProfile::sglang) {
    gauge("sglang:num_running_reqs", "The number of running requests.", static_cast<double>(engine_.running()));
    gauge("sglang:num_queue_reqs", "The number of requests in the waiting queue.",
          static_cast<double>(engine_.waiting()));
    gauge("sglang:token_usage", "The token usage.", engine_.pool().usage());
    counter("sglang:prompt_tokens_total", "Number of prefill tokens processed.", counters.prompt_tokens);
    counter("sglang:generation_tokens_total", "Number of generation tokens processed.", counters.generation_tokens);
    counter("sglang:cached_tokens_total", "Number of cached prompt tokens.", counters.prefix_hit_tokens);
    histogram("sglang:time_to_first_token_seconds", "Histogram of time to first token in seconds.", ttft_);
    histogram("sglang:e2e_request_latency_seconds", "Histogram of End-to-end request latency in seconds", e2e_);
  } else {
    gauge("vllm:num_requests_running", "Number of requests in model execution batches.",
          static_cast<double>(engine_.running()));
    gauge("vllm:num_requests_waiting", "Number of requests waiting to be processed.",
          static_cast<double>(engine_.waiting()));
    gauge("vllm:kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage.", engine_.pool().usage());
    counter("vllm:prefix_cache_queries_total", "Prefix cache queries, in terms of number of queried tokens.",
            counters.prefix_queries_tokens);
    counter("vllm:prefix_cache_hits_total", "Prefix cache hits, in terms of number of cached tokens.",
            counters.prefix_hit_tokens);
    counter("vllm:prompt_tokens_total", "Number of prefill tokens processed.", counters.prompt_tokens);
    counter("vllm:generation_tokens_total", "Number of generation tokens processed.", counters.generation_tokens);
    counter("vllm:num_preemptions_total", "Cumulative number of preemption from the engine.", counters.preemptions);
    histogram("vllm:time_to_first_token_seconds", "Histogram of time to first token in seconds.", ttft_);
    histogram("vllm:e2e_request_latency_seconds", "Histogram of e2e request latency in seconds.", e2e_);
    out << "# HELP vllm:cache_config_info Information of the LLMEngine CacheConfig\n"
        << "# TYPE vllm:cache_config_info gauge\n"
        << "vllm:cache_config_info{block_size=\"" << options_.block_size << "\",enable_prefix_caching=\"True\","
        << "engine=\"0\",num_gpu_blocks=\"" << options_.num_gpu_blocks << "\"} 1.0\n";
    if (!options_.lora_adapters.empty()) {
      // vLLM's: one sample per change, valued at its Unix time; the newest is current.
      auto join = [](const std::vector<std::string>& names) {
        std::string text;
        for (const auto& name : names) {
          text += (text.empty() ? "" : ",") + name;
        }
        return text;
      };
      out << "# HELP vllm:lora_requests_info Running stats on lora requests.\n"
          << "# TYPE vllm:lora_requests_info gauge\n"
          << "vllm:lora_requests_info{max_lora=\"" << options_.limits.max_loras << "\",running_lora_adapters=\""
          << join(engine_.running_adapters()) << "\",waiting_lora_adapters=\"" << join(engine_.waiting_adapters())
          << "\"} " << std::fixed << std::setprecision(3)
          << std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count()
          << std::defaultfloat << '\n';
      counter("kvgate_sim_lora_loads_total", "Adapters loaded onto the GPU (each load delays its step).",
              counters.lora_loads);
    }
  }
  counter("kvgate_sim_offloaded_hit_tokens_total", "Prompt tokens loaded from the CPU tier instead of computed.",
          counters.offloaded_hit_tokens);
  // The prefill work itself, whichever role did it: prompt tokens computed,
  // not served from a cache, a lower tier or a prefill worker's transfer.
  counter("kvgate_sim_computed_prompt_tokens_total", "Prompt tokens the replica computed.",
          counters.computed_prompt_tokens);
  // Every profile: the prompt-cache hits as the engine counts them (for
  // llama.cpp, the slots' reused prefixes), which a test compares with the
  // gateway's predictions.
  counter("kvgate_sim_prefix_hit_tokens_total", "Prompt tokens the replica served from its cache.",
          counters.prefix_hit_tokens);
  // Not vLLM metrics: what a benchmark needs to dial and check its load.
  // Rates and seconds are real (wall-clock) ones, the time scale applied.
  auto sim_gauge = [&](const char* name, const char* help, double value) {
    out << "# HELP " << name << ' ' << help << "\n# TYPE " << name << " gauge\n"
        << name << "{replica=\"" << options_.id << "\"} " << value << '\n';
  };
  auto sim_counter = [&](const char* name, const char* help, double value) {
    out << "# HELP " << name << ' ' << help << "\n# TYPE " << name << " counter\n"
        << name << "{replica=\"" << options_.id << "\"} " << value << '\n';
  };
  sim_gauge(
      "kvgate_sim_prefill_tokens_per_second", "Prompt tokens the replica computes per real second when busy.",
      options_.cost.prefill_ms_per_token > 0 ? 1000.0 * options_.time_scale / options_.cost.prefill_ms_per_token : 0.0);
  sim_gauge("kvgate_sim_num_gpu_blocks", "KV blocks of the replica.", options_.num_gpu_blocks);
  sim_counter("kvgate_sim_busy_seconds_total", "Real seconds spent running engine steps.", busy_seconds_);
  if (options_.role != SimRole::both) {
    sim_counter("kvgate_sim_remote_prefills_total", "Prompts computed here for a decoder (role prefill).",
                static_cast<double>(disaggregation_.remote_prefills));
    sim_counter("kvgate_sim_kv_transfers_total", "Prompts whose KV was received from a prefill worker (role decode).",
                static_cast<double>(disaggregation_.transfers));
    sim_counter("kvgate_sim_kv_transferred_tokens_total", "Prompt tokens whose KV was received.",
                static_cast<double>(disaggregation_.transferred_tokens));
    sim_counter("kvgate_sim_kv_transfer_seconds_total", "Model seconds spent receiving KV before admission.",
                disaggregation_.transfer_seconds);
    sim_counter("kvgate_sim_decoded_tokens_total", "Output tokens generated (decode steps' work).",
                static_cast<double>(counters.generation_tokens));
  }
  sim_counter("kvgate_sim_prefill_seconds_total", "Real seconds of engine steps spent computing prompt tokens.",
              prefill_seconds_);
  if (publisher_) {
    // Not a vLLM metric: lets tests and tools see how far a subscriber must get.
    gauge("kvgate_sim_kv_event_next_sequence", "Sequence number of the next KV-event batch the simulator publishes.",
          static_cast<double>(publisher_->next_sequence()));
  }
  return out.str();
}

}  // namespace kvgate::sim
