// kvgate-sim's HTTP front: OpenAI chat and text completions over the
// simulated engine, plus /health, /v1/models, /metrics, /reset_prefix_cache.
// Errors follow vLLM's current OpenAI-style shape.
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <ctime>
#include <nlohmann/json.hpp>

#include "kvgate/openai/prompt.hpp"
#include "kvgate/prompt/approximate_prompt.hpp"
#include "kvgate/prompt/exact_tokens.hpp"
#include "sim_server.hpp"

namespace kvgate::sim {

using namespace kvgate::http;
using namespace boost::asio::experimental::awaitable_operators;
using nlohmann::json;
using Request = bhttp::request<bhttp::string_body>;
using Response = bhttp::response<bhttp::string_body>;

namespace {

// Which replica answered, whatever sits in front (a benchmark's per-replica
// picture through nginx or HAProxy). Not an engine header.
constexpr std::string_view kReplicaHeader = "x-kvgate-sim-replica";

Response json_response(unsigned status, const json& body, bool keep_alive) {
  Response response{static_cast<bhttp::status>(status), 11};
  response.set(bhttp::field::content_type, "application/json");
  response.keep_alive(keep_alive);
  response.body() = body.dump();
  response.prepare_payload();
  return response;
}

json error_json(const std::string& message, const std::string& type, int code, const char* param = nullptr) {
  return {{"error",
           {{"message", message}, {"type", type}, {"param", param ? json(param) : json(nullptr)}, {"code", code}}}};
}

struct Completion {
  bool chat = true;
  bool stream = false;
  bool include_usage = false;
  std::uint32_t max_tokens = 16;
  std::vector<TokenId> prompt;
  std::string cache_salt;
  std::string id;
};

std::tm local_now() {
  std::time_t now = std::time(nullptr);
  std::tm local{};
  localtime_r(&now, &local);
  return local;
}

// With a tokenizer folder: the engine's exact tokens, computed by the code
// the gateway uses for such a model.
std::optional<std::string> read_exact_prompt(const prompt::ModelTokenizer& tokenizer, std::string_view body_text,
                                             Completion& completion) {
  auto endpoint = completion.chat ? openai::Endpoint::chat_completions : openai::Endpoint::completions;
  auto summary = openai::inspect_request(body_text, endpoint, {});
  if (!summary) {
    return summary.error().message;
  }
  if (completion.chat && !tokenizer.chat_template) {
    return std::string("the model's tokenizer_config.json has no chat_template");
  }
  thread_local tokenizer::EncodeWorkspace workspace;
  auto ids = prompt::exact_prompt_tokens(tokenizer, *summary, workspace, {local_now()});
  if (!ids) {
    return ids.error().message;
  }
  if (ids->empty() && !completion.chat) {
    return std::string("prompt must be a string or a list of token ids (batched prompts are not simulated)");
  }
  completion.prompt = std::move(*ids);
  return std::nullopt;
}

// The prompt's token ids, or an error message (400). The prompt is read
// exactly as the gateway reads it (openai::extract_prompt).
std::optional<std::string> read_prompt(const json& body, Completion& completion) {
  if (completion.chat) {
    if (!body.contains("messages") || !body["messages"].is_array() || body["messages"].empty()) {
      return "messages must be a non-empty list";
    }
  } else if (!body.contains("prompt")) {
    return "prompt is required";
  }
  auto prompt = openai::extract_prompt(
      body, completion.chat ? openai::Endpoint::chat_completions : openai::Endpoint::completions);
  if (std::holds_alternative<std::monostate>(prompt)) {
    return completion.chat ? "each message must be an object"
                           : "prompt must be a string or a list of token ids (batched prompts are not simulated)";
  }
  completion.prompt = prompt::approximate_prompt_tokens(prompt);
  return std::nullopt;
}

std::optional<std::string> read_completion(const json& body, std::string_view body_text, const SimServer& server,
                                           Completion& completion) {
  const auto& options = server.options();
  completion.stream = body.value("stream", false);
  if (body.contains("stream_options") && body["stream_options"].is_object()) {
    completion.include_usage = body["stream_options"].value("include_usage", false);
  }
  completion.max_tokens = options.default_max_tokens;
  for (const char* key : {"max_tokens", "max_completion_tokens"}) {
    if (body.contains(key) && !body[key].is_null()) {
      if (!body[key].is_number_integer() || body[key].get<std::int64_t>() < 1) {
        return std::string(key) + " must be a positive integer";
      }
      completion.max_tokens = body[key].get<std::uint32_t>();
    }
  }
  if (body.contains("cache_salt") && body["cache_salt"].is_string()) {
    completion.cache_salt = body["cache_salt"].get<std::string>();
  }
  if (completion.chat && (!body.contains("messages") || !body["messages"].is_array() || body["messages"].empty())) {
    return std::string("messages must be a non-empty list");
  }
  auto problem = server.tokenizer() ? read_exact_prompt(*server.tokenizer(), body_text, completion)
                                    : read_prompt(body, completion);
  if (problem) {
    return problem;
  }
  if (completion.prompt.empty()) {
    return std::string("the prompt is empty");
  }
  return std::nullopt;
}

std::string token_text(std::uint32_t index) {
  return "tok" + std::to_string(index) + " ";
}

json usage_json(const Completion& completion, std::uint32_t generated, std::uint32_t cached) {
  auto prompt_tokens = completion.prompt.size();
  return {{"prompt_tokens", prompt_tokens},
          {"completion_tokens", generated},
          {"total_tokens", prompt_tokens + generated},
          {"prompt_tokens_details", {{"cached_tokens", cached}}}};
}

json chunk_json(const Completion& completion, const std::string& model, std::optional<std::uint32_t> token, bool last) {
  json choice = {{"index", 0}, {"finish_reason", last ? json("length") : json(nullptr)}};
  if (completion.chat) {
    choice["delta"] = token ? json{{"content", token_text(*token)}} : json{{"role", "assistant"}, {"content", ""}};
  } else {
    choice["text"] = token ? token_text(*token) : "";
  }
  return {{"id", completion.id},
          {"object", completion.chat ? "chat.completion.chunk" : "text_completion"},
          {"created", 1700000000},
          {"model", model},
          {"choices", json::array({choice})}};
}

json whole_json(const Completion& completion, const std::string& model, std::uint32_t generated, std::uint32_t cached) {
  std::string text;
  for (std::uint32_t index = 0; index < generated; ++index) {
    text += token_text(index);
  }
  json choice = {{"index", 0}, {"finish_reason", "length"}};
  if (completion.chat) {
    choice["message"] = {{"role", "assistant"}, {"content", text}};
  } else {
    choice["text"] = text;
  }
  return {{"id", completion.id},
          {"object", completion.chat ? "chat.completion" : "text_completion"},
          {"created", 1700000000},
          {"model", model},
          {"choices", json::array({choice})},
          {"usage", usage_json(completion, generated, cached)}};
}

awaitable<void> wait_signal(asio::steady_timer& signal) {
  co_await signal.async_wait(use_nothrow);
}

class CompletionRun {
 public:
  CompletionRun(SimServer& server, beast::tcp_stream& stream, Completion completion)
      : server_(server), stream_(stream), completion_(std::move(completion)), state_(stream.get_executor()) {}

  // False when the client left (the request was aborted in the engine).
  awaitable<bool> run(bool keep_alive) {
    started_ = std::chrono::steady_clock::now();
    NewRequest request{completion_.prompt, completion_.max_tokens, server_.hash_seed_for(completion_.cache_salt),
                       completion_.cache_salt};
    handle_ = server_.submit(std::move(request), state_);
    bool ok = false;
    if (completion_.stream) {
      ok = co_await stream_events(keep_alive);
    } else {
      ok = co_await answer_whole(keep_alive);
    }
    if (!ok) {
      server_.cancel(handle_);
      co_return false;
    }
    auto ttft = server_.model_seconds(state_.first_token_at - started_);
    auto e2e = server_.model_seconds(std::chrono::steady_clock::now() - started_);
    server_.record_latency(ttft, e2e);
    co_return true;
  }

 private:
  // Waits for engine progress; false when the client closed meanwhile.
  awaitable<bool> wait_progress() {
    auto result = co_await (wait_signal(state_.signal) || wait_until_peer_closes(stream_.socket()));
    if (result.index() == 0) {
      co_return true;
    }
    if (std::get<1>(result)) {
      co_return false;  // the client closed the connection
    }
    // The client sent more bytes (a pipelined request): it is still there.
    co_await wait_signal(state_.signal);
    co_return true;
  }

  awaitable<bool> answer_whole(bool keep_alive) {
    while (!state_.finished) {
      const bool present = co_await wait_progress();
      if (!present || state_.failed) {
        co_return false;
      }
    }
    auto body = whole_json(completion_, server_.options().model, state_.generated, state_.cached_tokens);
    auto response = json_response(200, body, keep_alive);
    response.set(kReplicaHeader, server_.options().id);
    auto [error, written] = co_await bhttp::async_write(stream_, response, use_nothrow);
    co_return !error;
  }

  awaitable<bool> write_data(const std::string& data) {
    auto text = "data: " + data + "\n\n";
    auto [error, written] = co_await asio::async_write(stream_, bhttp::make_chunk(asio::buffer(text)), use_nothrow);
    co_return !error;
  }

  awaitable<bool> stream_events(bool keep_alive) {
    bhttp::response<bhttp::empty_body> header{bhttp::status::ok, 11};
    header.set(bhttp::field::content_type, "text/event-stream");
    header.set(kReplicaHeader, server_.options().id);
    header.chunked(true);
    header.keep_alive(keep_alive);
    bhttp::response_serializer<bhttp::empty_body> serializer(header);
    auto [header_error, header_bytes] = co_await bhttp::async_write_header(stream_, serializer, use_nothrow);
    if (header_error) {
      co_return false;
    }
    std::uint32_t sent = 0;
    const auto drop_after = server_.fault().drop_after_tokens;
    while (sent < completion_.max_tokens) {
      if (drop_after && sent >= *drop_after) {
        // Reset, like an engine process that died mid-stream.
        stream_.socket().set_option(asio::socket_base::linger(true, 0));
        co_return false;
      }
      if (sent == state_.generated && !state_.finished) {
        const bool present = co_await wait_progress();
        if (!present || state_.failed) {
          co_return false;
        }
        continue;
      }
      if (sent == 0) {
        const bool role_ok = co_await write_data(chunk_json(completion_, server_.options().model, {}, false).dump());
        if (!role_ok) {
          co_return false;
        }
      }
      for (; sent < state_.generated && !(drop_after && sent >= *drop_after); ++sent) {
        auto last = sent + 1 == completion_.max_tokens;
        const bool ok = co_await write_data(chunk_json(completion_, server_.options().model, sent, last).dump());
        if (!ok) {
          co_return false;
        }
      }
    }
    if (completion_.include_usage) {
      auto usage = chunk_json(completion_, server_.options().model, {}, true);
      usage["choices"] = json::array();
      usage["usage"] = usage_json(completion_, state_.generated, state_.cached_tokens);
      co_await write_data(usage.dump());
    }
    co_await write_data("[DONE]");
    auto [last_error, last_bytes] = co_await asio::async_write(stream_, bhttp::make_chunk_last(), use_nothrow);
    co_return !last_error;
  }

  SimServer& server_;
  beast::tcp_stream& stream_;
  Completion completion_;
  ActiveRequest state_;
  RequestHandle handle_ = 0;
  std::chrono::steady_clock::time_point started_;
};

// The error response when the request cannot be served, else nothing.
std::optional<Response> validate_completion(SimServer& server, const Request& request, bool chat,
                                            Completion& completion) {
  const auto& options = server.options();
  auto body = json::parse(request.body(), nullptr, false);
  if (body.is_discarded() || !body.is_object()) {
    return json_response(400, error_json("The request body is not a valid JSON object.", "BadRequestError", 400),
                         request.keep_alive());
  }
  auto model = body.value("model", std::string());
  if (model != options.model) {
    return json_response(404, error_json("The model `" + model + "` does not exist.", "NotFoundError", 404, "model"),
                         request.keep_alive());
  }
  completion.chat = chat;
  if (auto problem = read_completion(body, request.body(), server, completion)) {
    return json_response(400, error_json(*problem, "BadRequestError", 400), request.keep_alive());
  }
  auto requested = completion.prompt.size() + completion.max_tokens;
  if (requested > options.max_model_len) {
    // vLLM's wording for an over-long request.
    auto message = "This model's maximum context length is " + std::to_string(options.max_model_len) +
                   " tokens. However, you requested " + std::to_string(requested) + " tokens (" +
                   std::to_string(completion.prompt.size()) + " in the messages, " +
                   std::to_string(completion.max_tokens) +
                   " in the completion). Please reduce the length of the messages or completion.";
    return json_response(400, error_json(message, "BadRequestError", 400), request.keep_alive());
  }
  return std::nullopt;
}

Response simple_answer(SimServer& server, const Request& request, const std::string& path) {
  const bool keep_alive = request.keep_alive();
  if (path == "/health") {
    Response response{bhttp::status::ok, 11};
    response.keep_alive(keep_alive);
    response.prepare_payload();
    return response;
  }
  if (path == "/v1/models") {
    json model = {{"id", server.options().model},   {"object", "model"},
                  {"created", 1700000000},          {"owned_by", "vllm"},
                  {"root", server.options().model}, {"max_model_len", server.options().max_model_len}};
    return json_response(200, {{"object", "list"}, {"data", json::array({model})}}, keep_alive);
  }
  if (path == "/metrics") {
    Response response{bhttp::status::ok, 11};
    response.set(bhttp::field::content_type, "text/plain; version=0.0.4; charset=utf-8");
    response.keep_alive(keep_alive);
    response.body() = server.metrics_text();
    response.prepare_payload();
    return response;
  }
  if (path == "/reset_prefix_cache" && request.method() == bhttp::verb::post) {
    bool reset = server.reset_prefix_cache();
    return json_response(reset ? 200 : 409, {{"reset", reset}}, keep_alive);
  }
  return json_response(404, error_json("Not found: " + path, "NotFoundError", 404), keep_alive);
}

// Writes a response; true when the connection may serve another request.
awaitable<bool> send(beast::tcp_stream& stream, Response response) {
  auto [error, written] = co_await bhttp::async_write(stream, response, use_nothrow);
  co_return !error && response.keep_alive();
}

// One request; true when the connection may serve another.
awaitable<bool> handle_sim_request(SimServer& server, beast::tcp_stream& stream, const Request& request) {
  auto target = std::string(request.target());
  auto path = target.substr(0, target.find('?'));
  const bool keep_alive = request.keep_alive();
  if (path == "/sim/fault" && request.method() == bhttp::verb::post) {
    auto problem = server.apply_fault(request.body());
    auto response = problem ? json_response(400, error_json(*problem, "BadRequestError", 400), keep_alive)
                            : json_response(200, {{"ok", true}}, keep_alive);
    co_return co_await send(stream, std::move(response));
  }
  if (path == "/metrics" && server.fault().metrics_delay_ms > 0) {
    asio::steady_timer delay(stream.get_executor(), std::chrono::milliseconds(server.fault().metrics_delay_ms));
    co_await delay.async_wait(use_nothrow);
  }
  if (path != "/metrics" && server.fault().hang) {
    co_await wait_until_peer_closes(stream.socket());
    co_return false;
  }
  if (path != "/metrics" && server.fault().status) {
    auto status = *server.fault().status;
    auto response = json_response(
        status, error_json("injected failure", "ServiceUnavailableError", static_cast<int>(status)), keep_alive);
    co_return co_await send(stream, std::move(response));
  }
  const bool chat = path == "/v1/chat/completions";
  if ((chat || path == "/v1/completions") && request.method() == bhttp::verb::post) {
    Completion completion;
    completion.id = "cmpl-sim-" + std::to_string(server.next_completion_number());
    auto rejection = validate_completion(server, request, chat, completion);
    if (rejection) {
      co_return co_await send(stream, std::move(*rejection));
    }
    CompletionRun run(server, stream, std::move(completion));
    const bool served = co_await run.run(keep_alive);
    co_return served&& keep_alive;
  }
  co_return co_await send(stream, simple_answer(server, request, path));
}

}  // namespace

awaitable<void> serve_sim_connection(SimServer& server, tcp::socket socket) {
  beast::tcp_stream stream(std::move(socket));
  beast::flat_buffer buffer;
  for (;;) {
    auto request = co_await read_request(stream, buffer, 64 * 1024 * 1024);
    if (!request) {
      co_return;
    }
    const bool keep_going = co_await handle_sim_request(server, stream, *request);
    if (!keep_going) {
      co_return;
    }
  }
}

}  // namespace kvgate::sim
