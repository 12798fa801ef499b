#include "runner.hpp"

#include <boost/asio/detached.hpp>
#include <nlohmann/json.hpp>

#include "client.hpp"
#include "dial.hpp"

namespace kvgate::load {
namespace {

using namespace kvgate::http;
using nlohmann::json;
using Clock = std::chrono::steady_clock;

struct Shared {
  const Workload& workload;
  const RunOptions& options;
  // One URL, or several gateways in front of the same replicas, taken in
  // turn per request or per session (TargetSpread).
  std::vector<HttpUrl> urls;
  TargetSpread spread = TargetSpread::per_request;
  std::size_t next_request = 0;  // traces: requests without a session take the gateways in turn
  std::string model;
  Clock::time_point started;
  std::vector<RequestRecord> records;
  std::size_t next_session = 0;
  std::string failure;  // a run-wide problem (the model list could not be read)
  // Traces: connections whose request ended, for the next request to take
  // (one pool per URL).
  std::vector<std::vector<std::unique_ptr<Connection>>> idle_connections;
  PrefixCeiling ceiling;

  [[nodiscard]] bool out_of_time() const {
    return options.duration_seconds > 0 &&
           std::chrono::duration<double>(Clock::now() - started).count() >= options.duration_seconds;
  }
};

// A session's connections, one per URL, opened on first use.
class ConnectionSet {
 public:
  ConnectionSet(asio::any_io_executor executor, const std::vector<HttpUrl>& urls)
      : executor_(std::move(executor)), urls_(urls), connections_(urls.size()) {}
  // Per request, a session's turn t goes to gateway (session + t) mod n:
  // consecutive turns land on different gateways whatever the other
  // sessions interleave (a shared counter would let concurrent sessions
  // take a gateway's turns from each other), and sessions start spread.
  Connection& next(const Shared& shared, std::size_t session, std::uint32_t turn) {
    const auto index = (shared.spread == TargetSpread::per_session ? session : session + turn) % urls_.size();
    if (!connections_[index]) {
      connections_[index] = std::make_unique<Connection>(executor_, urls_[index]);
    }
    return *connections_[index];
  }

 private:
  asio::any_io_executor executor_;
  const std::vector<HttpUrl>& urls_;
  std::vector<std::unique_ptr<Connection>> connections_;
};

double since_start_ms(const Shared& shared) {
  return std::chrono::duration<double, std::milli>(Clock::now() - shared.started).count();
}

// `reusable`: the prompt's share an earlier request had sent (PrefixCeiling).
void record(Shared& shared, std::size_t session, std::uint32_t turn, const Answer& answer, double sent_ms,
            double reusable) {
  shared.records.push_back({session, turn, answer.status, answer.error, answer.worker, answer.prompt_tokens,
                            answer.cached_tokens, answer.output_tokens, answer.ttft_ms, answer.latency_ms, sent_ms,
                            static_cast<std::uint32_t>(reusable * answer.prompt_tokens)});
  shared.records.back().predicted_cached = receipt_predicted_cached(answer.receipt);
  shared.records.back().full_attention_cached = receipt_number(answer.receipt, "full_attention_cached");
  shared.records.back().remote_prefill = answer.receipt.find("prefill=remote_prefill") != std::string::npos;
}

// Sub-agents of one fork, running at once; the session waits for the last.
struct Fork {
  std::size_t remaining = 0;
  asio::steady_timer done;
};

// One sub-agent's requests in turn, on a connection of its own, with the
// session's key. Nested forks are not run (a sub-agent's own sub-agents).
awaitable<void> run_subagent(Shared& shared, std::size_t session, const Session& subagent, std::uint32_t number,
                             std::uint32_t fork_size, std::optional<std::string> session_header,
                             std::shared_ptr<Fork> fork) {
  auto executor = co_await asio::this_coro::executor;
  Connection connection(executor, shared.urls[session % shared.urls.size()]);
  for (std::uint32_t turn = 0; turn < subagent.turns.size() && !shared.out_of_time(); ++turn) {
    const auto& step = subagent.turns[turn];
    if (step.fork() || step.prompt.empty()) {
      continue;
    }
    const std::string path = "/v1/completions";
    const auto body = completion_body(shared.model, step.prompt, step.max_tokens, shared.options.request_fields);
    const double reusable = shared.ceiling.observe(step.prompt);
    const double sent_ms = since_start_ms(shared);
    auto answer = co_await connection.post(path, body, session_header, true);
    record(shared, session, turn, answer, sent_ms, reusable);
    shared.records.back().subagent = number;
    shared.records.back().fork_size = fork_size;
    const bool answered_in_part = answer.error == "stream_error" && answer.ttft_ms >= 0;
    if (!answer.error.empty() && !answered_in_part) {
      break;
    }
    if (step.think_ms > 0) {
      asio::steady_timer think(executor, std::chrono::milliseconds(step.think_ms));
      co_await think.async_wait(use_nothrow);
    }
  }
  if (--fork->remaining == 0) {
    fork->done.cancel();
  }
}

awaitable<void> run_fork(Shared& shared, std::size_t session, const Turn& step,
                         const std::optional<std::string>& session_header) {
  auto executor = co_await asio::this_coro::executor;
  auto fork = std::make_shared<Fork>(Fork{step.subagents.size(), asio::steady_timer(executor)});
  fork->done.expires_at(Clock::time_point::max());
  const auto fork_size = static_cast<std::uint32_t>(step.subagents.size());
  for (std::uint32_t number = 0; number < fork_size; ++number) {
    asio::co_spawn(executor,
                   run_subagent(shared, session, step.subagents[number], number + 1, fork_size, session_header, fork),
                   asio::detached);
  }
  if (fork->remaining > 0) {
    co_await fork->done.async_wait(use_nothrow);
  }
}

awaitable<void> run_session(Shared& shared, ConnectionSet& connections, std::size_t index) {
  auto executor = co_await asio::this_coro::executor;
  const auto& session = shared.workload.sessions[index];
  const std::optional<std::string> session_header = shared.options.session_prefix + session.id;
  json messages = json::array();
  std::vector<std::pair<std::string, std::string>> prefix_messages;
  if (!session.system.empty()) {
    messages.push_back({{"role", "system"}, {"content", session.system}});
    prefix_messages.emplace_back("system", session.system);
  }
  for (std::uint32_t turn = 0; turn < session.turns.size() && !shared.out_of_time(); ++turn) {
    const auto& step = session.turns[turn];
    // Returns at once unless the step is a fork (an await outside any
    // branch, see below).
    co_await run_fork(shared, index, step, session_header);
    if (step.fork()) {
      continue;
    }
    // One await per turn (and its arguments named first): g++ 12
    // miscompiles awaits in branches and on temporaries (README).
    std::string path = "/v1/completions";
    std::string body;
    double reusable = 0;
    if (step.prompt.empty()) {
      messages.push_back({{"role", "user"}, {"content", step.user}});
      prefix_messages.emplace_back("user", step.user);
      path = "/v1/chat/completions";
      body = chat_body(session.model.empty() ? shared.model : session.model, messages, step.max_tokens,
                       shared.options.request_fields);
      reusable = shared.ceiling.observe(chat_prefix_text(prefix_messages));
    } else {
      body = completion_body(session.model.empty() ? shared.model : session.model, step.prompt, step.max_tokens,
                             shared.options.request_fields);
      reusable = shared.ceiling.observe(step.prompt);
    }
    const double sent_ms = since_start_ms(shared);
    auto& connection = connections.next(shared, index, turn);
    auto answer = co_await connection.post(path, body, session_header, true);
    record(shared, index, turn, answer, sent_ms, reusable);
    // A conversation whose turn failed does not go on, unless the engine
    // failed only after its first token (llama-server ends a stream with an
    // error when its output parser rejects what a random-weights model
    // wrote): the prompt was computed, and the next turn carries what came.
    const bool answered_in_part = answer.error == "stream_error" && answer.ttft_ms >= 0;
    if (!answer.error.empty() && !answered_in_part) {
      break;
    }
    messages.push_back({{"role", "assistant"}, {"content", answer.text}});
    prefix_messages.emplace_back("assistant", answer.text);
    if (step.think_ms > 0) {
      asio::steady_timer think(executor, std::chrono::milliseconds(step.think_ms));
      co_await think.async_wait(use_nothrow);
    }
  }
}

// Closed loop: takes the next session when its last one ends.
awaitable<void> session_worker(Shared& shared) {
  auto executor = co_await asio::this_coro::executor;
  ConnectionSet connections(executor, shared.urls);
  while (shared.next_session < shared.workload.sessions.size() && !shared.out_of_time()) {
    const auto index = shared.next_session++;
    co_await run_session(shared, connections, index);
  }
}

awaitable<void> open_session(Shared& shared, std::size_t index) {
  auto executor = co_await asio::this_coro::executor;
  ConnectionSet connections(executor, shared.urls);
  co_await run_session(shared, connections, index);
}

// Open loop: each session starts at its time, whatever is in flight.
awaitable<void> session_scheduler(Shared& shared) {
  auto executor = co_await asio::this_coro::executor;
  asio::steady_timer timer(executor);
  const auto& starts = shared.options.session_starts_ms;
  const auto count = std::min(starts.size(), shared.workload.sessions.size());
  for (std::size_t index = 0; index < count && !shared.out_of_time(); ++index) {
    const auto at = shared.started + std::chrono::duration_cast<Clock::duration>(
                                         std::chrono::duration<double, std::milli>(starts[index]));
    timer.expires_at(at);
    co_await timer.async_wait(use_nothrow);
    asio::co_spawn(executor, open_session(shared, index), asio::detached);
  }
  if (shared.options.on_last_arrival) {
    shared.options.on_last_arrival(since_start_ms(shared) / 1000);
  }
}

awaitable<void> trace_request(Shared& shared, std::size_t index) {
  auto executor = co_await asio::this_coro::executor;
  const auto gateway = shared.next_request++ % shared.urls.size();
  auto& idle = shared.idle_connections[gateway];
  std::unique_ptr<Connection> connection;
  if (idle.empty()) {
    connection = std::make_unique<Connection>(executor, shared.urls[gateway]);
  } else {
    connection = std::move(idle.back());
    idle.pop_back();
  }
  const auto& request = shared.workload.trace[index];
  const auto body = completion_body(shared.model, request.prompt, request.max_tokens, shared.options.request_fields);
  const std::optional<std::string> no_session;
  const std::string path = "/v1/completions";
  const double reusable = shared.ceiling.observe(request.prompt);
  const double sent_ms = since_start_ms(shared);
  auto answer = co_await connection->post(path, body, no_session, true);
  record(shared, index, 0, answer, sent_ms, reusable);
  shared.idle_connections[gateway].push_back(std::move(connection));
}

awaitable<void> trace_scheduler(Shared& shared) {
  auto executor = co_await asio::this_coro::executor;
  asio::steady_timer timer(executor);
  for (std::size_t index = 0; index < shared.workload.trace.size() && !shared.out_of_time(); ++index) {
    const auto at =
        shared.started + std::chrono::duration_cast<Clock::duration>(
                             std::chrono::duration<double, std::milli>(shared.workload.trace[index].arrival_ms));
    timer.expires_at(at);
    co_await timer.async_wait(use_nothrow);
    asio::co_spawn(executor, trace_request(shared, index), asio::detached);
  }
  if (shared.options.on_last_arrival) {
    shared.options.on_last_arrival(since_start_ms(shared) / 1000);
  }
}

awaitable<void> discover_model(Shared& shared) {
  if (!shared.model.empty()) {
    co_return;
  }
  Connection connection(co_await asio::this_coro::executor, shared.urls.front());
  const std::string path = "/v1/models";
  auto [status, body] = co_await connection.get(path);
  auto models = json::parse(body, nullptr, false);
  if (status != 200 || !models.is_object() || !models.contains("data") || !models["data"].is_array() ||
      models["data"].empty() || !models["data"][0].contains("id")) {
    shared.failure = "GET /v1/models on the target did not list a model (status " + std::to_string(status) + ")";
    co_return;
  }
  shared.model = models["data"][0]["id"].get<std::string>();
}

awaitable<void> reset_one(std::string replica, HttpUrl url, std::string& failure) {
  Connection connection(co_await asio::this_coro::executor, std::move(url));
  const std::string path = "/reset_prefix_cache";
  const std::string empty_body;
  const std::optional<std::string> no_session;
  auto answer = co_await connection.post(path, empty_body, no_session);
  if (answer.status != 200) {
    failure += "POST " + replica + "/reset_prefix_cache failed (" +
               (answer.error.empty() ? std::to_string(answer.status) : answer.error) + "); ";
  }
}

awaitable<void> scrape_one(std::string replica, HttpUrl url, ReplicaMetrics& out, std::string& failure) {
  Connection connection(co_await asio::this_coro::executor, std::move(url));
  const std::string path = "/metrics";
  auto [status, body] = co_await connection.get(path);
  if (status != 200) {
    failure += "GET " + replica + "/metrics failed (" + std::to_string(status) + "); ";
    co_return;
  }
  out = parse_replica_metrics(body);
}

}  // namespace

namespace {

awaitable<void> fetch_first_model(HttpUrl url, std::string target, std::string& model, std::string& failure) {
  Connection connection(co_await asio::this_coro::executor, std::move(url));
  const std::string path = "/v1/models";
  auto [status, body] = co_await connection.get(path);
  auto models = json::parse(body, nullptr, false);
  if (status != 200 || !models.is_object() || !models.contains("data") || !models["data"].is_array() ||
      models["data"].empty() || !models["data"][0].contains("id")) {
    failure = "GET /v1/models on " + target + " did not list a model (status " + std::to_string(status) + ")";
    co_return;
  }
  model = models["data"][0]["id"].get<std::string>();
}

}  // namespace

Result<std::string, std::string> first_model(const std::string& target) {
  auto url = parse_upstream_url(target);
  if (!url) {
    return unexpected(target + ": " + url.error());
  }
  asio::io_context context;
  std::string failure;
  std::string model;
  asio::co_spawn(context, fetch_first_model(*url, target, model, failure), asio::detached);
  context.run();
  if (!failure.empty()) {
    return unexpected(failure);
  }
  return model;
}

TargetSpread target_spread(std::string_view target) {
  return target.find('|') != std::string_view::npos ? TargetSpread::per_session : TargetSpread::per_request;
}

std::vector<std::string> split_targets(std::string_view target) {
  std::vector<std::string> targets;
  while (!target.empty()) {
    const auto plus = target.find_first_of("+|");
    auto one = target.substr(0, plus);
    if (!one.empty()) {
      targets.emplace_back(one);
    }
    if (plus == std::string_view::npos) {
      break;
    }
    target.remove_prefix(plus + 1);
  }
  return targets;
}

Result<std::vector<ReplicaMetrics>, std::string> scrape_replicas(const std::vector<std::string>& replicas) {
  asio::io_context context;
  std::string failure;
  std::vector<ReplicaMetrics> metrics(replicas.size());
  for (std::size_t index = 0; index < replicas.size(); ++index) {
    auto url = parse_upstream_url(replicas[index]);
    if (!url) {
      return unexpected(replicas[index] + ": " + url.error());
    }
    asio::co_spawn(context, scrape_one(replicas[index], *url, metrics[index], failure), asio::detached);
  }
  context.run();
  if (!failure.empty()) {
    return unexpected(failure);
  }
  return metrics;
}

Result<RunResult, std::string> run_workload(const Workload& workload, const RunOptions& options) {
  std::vector<HttpUrl> urls;
  for (const auto& target : split_targets(options.target)) {
    auto url = parse_upstream_url(target);
    if (!url) {
      return unexpected("--target " + target + ": " + url.error());
    }
    urls.push_back(std::move(*url));
  }
  if (urls.empty()) {
    return unexpected("--target: no URL");
  }
  asio::io_context context;
  Shared shared{workload,
                options,
                std::move(urls),
                target_spread(options.target),
                0,
                options.model,
                Clock::now(),
                {},
                0,
                {},
                {},
                PrefixCeiling(options.ceiling_block_bytes)};
  shared.idle_connections.resize(shared.urls.size());
  asio::co_spawn(context, discover_model(shared), asio::detached);
  context.run();
  if (!shared.failure.empty()) {
    return unexpected(shared.failure);
  }
  context.restart();
  shared.started = Clock::now();
  if (!workload.sessions.empty() && !options.session_starts_ms.empty()) {
    asio::co_spawn(context, session_scheduler(shared), asio::detached);
  } else if (!workload.sessions.empty()) {
    for (std::uint32_t worker = 0; worker < std::max<std::uint32_t>(1, options.concurrency); ++worker) {
      asio::co_spawn(context, session_worker(shared), asio::detached);
    }
  } else {
    asio::co_spawn(context, trace_scheduler(shared), asio::detached);
  }
  context.run();
  RunResult result;
  result.model = shared.model;
  result.records = std::move(shared.records);
  result.wall_seconds = std::chrono::duration<double>(Clock::now() - shared.started).count();
  return result;
}

std::optional<std::string> reset_prefix_caches(const std::vector<std::string>& replicas) {
  asio::io_context context;
  std::string failure;
  for (const auto& replica : replicas) {
    auto url = parse_upstream_url(replica);
    if (!url) {
      return "--reset " + replica + ": " + url.error();
    }
    asio::co_spawn(context, reset_one(replica, *url, failure), asio::detached);
  }
  context.run();
  if (!failure.empty()) {
    return failure;
  }
  return std::nullopt;
}

namespace {

struct TrajectoryState {
  const Session& session;
  const TrajectoryOptions& options;
  std::vector<HttpUrl> replica_urls;
  TrajectoryRun run;
  std::string failure;
};

awaitable<void> read_kv_usage(Connection& connection, std::optional<double>& usage) {
  const std::string path = "/metrics";
  auto [status, body] = co_await connection.get(path);
  usage = status == 200 ? kv_usage_from_metrics(body) : std::nullopt;
}

awaitable<void> trajectory_turns(TrajectoryState& state, HttpUrl target) {
  auto executor = co_await asio::this_coro::executor;
  const auto& options = state.options;
  Connection through_target(executor, std::move(target));
  std::vector<std::unique_ptr<Connection>> replicas;
  std::vector<std::string> replica_ids;
  for (std::size_t index = 0; index < state.replica_urls.size(); ++index) {
    replicas.push_back(std::make_unique<Connection>(executor, state.replica_urls[index]));
    replica_ids.push_back(options.replicas[index].first);
  }
  const std::optional<std::string> session_header =
      options.mode == TrajectoryMode::no_session_key ? std::nullopt : std::optional<std::string>(options.session_key);
  json messages = json::array();
  if (!state.session.system.empty()) {
    messages.push_back({{"role", "system"}, {"content", state.session.system}});
  }
  for (std::uint32_t index = 0; index < state.session.turns.size(); ++index) {
    const auto& step = state.session.turns[index];
    if (step.fork()) {
      continue;  // a trajectory follows the session's own requests
    }
    std::string path = "/v1/completions";
    std::string body;
    if (step.prompt.empty()) {
      messages.push_back({{"role", "user"}, {"content", step.user}});
      path = "/v1/chat/completions";
      body = chat_body(state.options.model, messages, step.max_tokens);
    } else {
      body = completion_body(state.options.model, step.prompt, step.max_tokens);
    }
    // Every replica's KV usage before the turn: the chosen one's is the
    // allocation it was chosen at.
    std::vector<std::optional<double>> usage(replicas.size());
    for (std::size_t replica = 0; replica < replicas.size(); ++replica) {
      co_await read_kv_usage(*replicas[replica], usage[replica]);
    }
    Connection* connection = &through_target;
    bool direct = false;
    if (options.mode == TrajectoryMode::cold_second_turn && index == 1) {
      const auto& first_worker = state.run.turns.front().worker;
      if (auto cold = cold_replica(replica_ids, first_worker)) {
        connection = replicas[*cold].get();
        direct = true;
      } else {
        state.run.note = "No replica other than the first turn's (" + first_worker +
                         ") was named with --replica: the second turn went through the target.";
      }
    }
    auto answer = co_await connection->post(path, body, session_header, true);
    TrajectoryTurn turn;
    turn.number = index + 1;
    turn.worker = answer.worker;
    turn.direct = direct;
    turn.error = answer.error;
    turn.input_tokens = answer.prompt_tokens;
    turn.cached_tokens = answer.cached_tokens;
    turn.predicted_cached_tokens = receipt_predicted_cached(answer.receipt);
    turn.ttft_ms = answer.ttft_ms;
    turn.decode_ms = answer.ttft_ms >= 0 ? answer.latency_ms - answer.ttft_ms : -1;
    for (std::size_t replica = 0; replica < replica_ids.size(); ++replica) {
      if (replica_ids[replica] == answer.worker) {
        turn.kv_usage = usage[replica];
      }
    }
    state.run.turns.push_back(std::move(turn));
    // As in a run: a turn that failed ends the trajectory, unless the
    // engine failed only after its first token.
    const bool answered_in_part = answer.error == "stream_error" && answer.ttft_ms >= 0;
    if (!answer.error.empty() && !answered_in_part) {
      break;
    }
    messages.push_back({{"role", "assistant"}, {"content", answer.text}});
  }
}

}  // namespace

Result<TrajectoryRun, std::string> run_trajectory(const Session& session, const TrajectoryOptions& options) {
  auto target = parse_upstream_url(options.target);
  if (!target) {
    return unexpected(options.target + ": " + target.error());
  }
  TrajectoryState state{session, options, {}, {}, {}};
  for (const auto& [id, url] : options.replicas) {
    auto parsed = parse_upstream_url(url);
    if (!parsed) {
      return unexpected("--replica " + id + "=" + url + ": " + parsed.error());
    }
    state.replica_urls.push_back(std::move(*parsed));
  }
  state.run.mode = options.mode;
  asio::io_context context;
  asio::co_spawn(context, trajectory_turns(state, std::move(*target)), asio::detached);
  context.run();
  if (!state.failure.empty()) {
    return unexpected(state.failure);
  }
  return std::move(state.run);
}

}  // namespace kvgate::load
