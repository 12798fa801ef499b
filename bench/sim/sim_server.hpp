#pragma once
// kvgate-sim's I/O shell: the HTTP front (OpenAI API, /health, /metrics,
// /reset_prefix_cache), the engine loop that runs Engine::step() and sleeps
// each step's modelled duration / --time-scale, and KV-event publishing.
// One thread, one io_context: the engine, the sessions and the ZMQ socket
// are touched only from it.
#include <chrono>
#include <memory>
#include <optional>
#include <unordered_map>
#include <vector>
#include "kvgate/prompt/model_tokenizer.hpp"

#include "engine.hpp"
#include "kv_publisher.hpp"
#include "kvgate/http/beast.hpp"
#include "sim_options.hpp"

namespace kvgate::sim {

// A request in flight, owned by its HTTP session; the engine loop updates it
// and wakes the session.
struct ActiveRequest {
  explicit ActiveRequest(http::asio::any_io_executor executor) : signal(std::move(executor)) {
    signal.expires_at(std::chrono::steady_clock::time_point::max());
  }
  std::uint32_t generated = 0;
  bool finished = false;
  bool failed = false;  // the simulated engine restarted under this request
  std::uint32_t cached_tokens = 0;
  std::chrono::steady_clock::time_point first_token_at;
  http::asio::steady_timer signal;  // cancelled on progress
};

// Injected misbehaviour (POST /sim/fault). Persistent modes last until
// {"mode": "none"}; evict_all, drop_batches and restart act once.
struct FaultState {
  std::optional<unsigned> status;                  // answer every API call with it
  std::uint32_t status_delay_ms = 0;               // that late, except bootstrap rooms (a slowly failing engine)
  bool hang = false;                               // read requests, never answer
  double slow_factor = 1.0;                        // multiply step durations
  std::optional<std::uint32_t> drop_after_tokens;  // reset streams after N tokens
  std::uint32_t metrics_delay_ms = 0;              // answer /metrics this late (llama.cpp queues it)
};

class SimServer {
 public:
  // `tokenizer` is null for the approximate tokenisation.
  SimServer(http::asio::io_context& io, SimOptions options,
            std::shared_ptr<const prompt::ModelTokenizer> tokenizer = nullptr);

  Result<http::tcp::endpoint, std::string> bind();
  void start();

  // Used by request handling (sim_completion.cpp).
  const SimOptions& options() const { return options_; }
  const prompt::ModelTokenizer* tokenizer() const { return tokenizer_.get(); }
  Engine& engine() { return engine_; }
  BlockHash hash_seed_for(std::string_view cache_salt, std::string_view lora_name = {}) const;
  RequestHandle submit(NewRequest request, ActiveRequest& state);
  void cancel(RequestHandle handle);
  void record_latency(double ttft_seconds, double e2e_seconds);
  // Model time: real time multiplied by the time scale.
  double model_seconds(std::chrono::steady_clock::duration real) const;
  bool reset_prefix_cache();
  // Applies a POST /sim/fault body; returns an error message for a bad one.
  std::optional<std::string> apply_fault(const std::string& body);
  const FaultState& fault() const { return fault_; }
  // Disaggregated serving. A prefill replica's SGLang bootstrap rooms: the
  // prompts it computed for decoders, which GET /sim/bootstrap/<room> waits
  // for (the room's prompt tokens; nullopt: the prefill failed, or did not
  // arrive within `patience`).
  void open_room(std::uint64_t room);
  void close_room(std::uint64_t room, std::optional<std::uint32_t> tokens);
  http::awaitable<std::optional<std::uint32_t>> await_room(std::uint64_t room, std::chrono::milliseconds patience);
  // Model milliseconds to move `tokens` tokens' KV over --transfer-gbps.
  double transfer_ms(std::uint32_t tokens) const {
    return static_cast<double>(tokens) * options_.kv_bytes_per_token / (options_.transfer_gbps * 1e6);
  }
  struct DisaggregationCounters {
    std::uint64_t remote_prefills = 0;  // prompts computed here for a decoder
    std::uint64_t transfers = 0;        // prompts whose KV was received here
    std::uint64_t transferred_tokens = 0;
    double transfer_seconds = 0;  // model seconds spent receiving
  };
  DisaggregationCounters& disaggregation() { return disaggregation_; }
  std::string metrics_text();
  std::uint64_t next_completion_number() { return ++completions_; }
  // The KV-event publisher's bound address, empty when events are off.
  std::string kv_events_endpoint() const { return publisher_ ? publisher_->endpoint() : std::string(); }
  std::string kv_events_replay_endpoint() const { return publisher_ ? publisher_->replay_endpoint() : std::string(); }

 private:
  std::shared_ptr<const prompt::ModelTokenizer> tokenizer_;
  http::awaitable<void> accept_loop();
  http::awaitable<void> engine_loop();
  http::awaitable<void> replay_loop();
  void publish_events();

  http::asio::io_context& io_;
  SimOptions options_;
  Engine engine_;
  BlockHash base_seed_;
  std::unique_ptr<KvPublisher> publisher_;
  http::tcp::acceptor acceptor_{io_};
  http::asio::steady_timer wake_{io_};
  std::unordered_map<RequestHandle, ActiveRequest*> active_;
  std::uint64_t completions_ = 0;
  // Real (wall) seconds the modelled GPU spent on steps, and on the prompt
  // tokens of those steps: a benchmark's measure of the load it offered.
  double busy_seconds_ = 0;
  double prefill_seconds_ = 0;
  FaultState fault_;
  void restart();
  struct Room {
    std::optional<std::uint32_t> tokens;  // set when its prefill ended well
    bool closed = false;
    std::shared_ptr<http::asio::steady_timer> signal;  // cancelled when closed
  };
  std::unordered_map<std::uint64_t, Room> rooms_;
  DisaggregationCounters disaggregation_;
  Room& room(std::uint64_t id);
  struct Histogram {
    std::vector<double> bounds;
    std::vector<std::uint64_t> counts;  // per bucket, not cumulative
    double sum = 0;
    std::uint64_t count = 0;
    void observe(double value);
  };
  Histogram ttft_;
  Histogram e2e_;
};

// Serves one HTTP connection (sim_completion.cpp).
http::awaitable<void> serve_sim_connection(SimServer& server, http::tcp::socket socket);

}  // namespace kvgate::sim
