// kvgate-sim's HTTP front: OpenAI chat and text completions over the
// simulated engine, plus /health, /v1/models, /metrics, /reset_prefix_cache
// and vLLM's /v1/chat/completions/render and /v1/completions/render.
// Errors follow vLLM's current OpenAI-style shape.
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <charconv>
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

// An error body as the profile's engine writes it. vLLM: OpenAI's nested
// object with its exception names; SGLang: the flat object vLLM used to
// send; llama.cpp: nested, code first, its own type names
// (tools/server/utils.hpp, format_error_response).
std::string error_body(EngineProfile profile, unsigned status, const std::string& message, const char* param = nullptr,
                       const char* llama_type = nullptr) {
  const char* name = status == 400   ? "BadRequestError"
                     : status == 404 ? "NotFoundError"
                     : status == 503 ? "ServiceUnavailableError"
                                     : "InternalServerError";
  switch (profile) {
    case EngineProfile::vllm:
      return json{
          {"error",
           {{"message", message}, {"type", name}, {"param", param ? json(param) : json(nullptr)}, {"code", status}}}}
          .dump();
    case EngineProfile::sglang:
      return json{{"object", "error"},
                  {"message", message},
                  {"type", name},
                  {"param", param ? json(param) : json(nullptr)},
                  {"code", status}}
          .dump();
    case EngineProfile::llamacpp:
      break;
  }
  const char* type = llama_type != nullptr ? llama_type
                     : status == 400       ? "invalid_request_error"
                     : status == 401       ? "authentication_error"
                     : status == 404       ? "not_found_error"
                     : status == 503       ? "unavailable_error"
                                           : "server_error";
  nlohmann::ordered_json body;
  body["error"]["code"] = status;
  body["error"]["message"] = message;
  body["error"]["type"] = type;
  return body.dump();
}

Response error_response(const SimServer& server, unsigned status, const std::string& message, bool keep_alive,
                        const char* param = nullptr) {
  Response response{static_cast<bhttp::status>(status), 11};
  response.set(bhttp::field::content_type, "application/json");
  response.keep_alive(keep_alive);
  response.body() = error_body(server.options().profile, status, message, param);
  response.prepare_payload();
  return response;
}

struct Completion {
  bool chat = true;
  bool stream = false;
  bool include_usage = false;
  std::uint32_t max_tokens = 16;
  std::vector<TokenId> prompt;
  std::string cache_salt;
  std::string lora_name;  // the adapter the request named; empty: the base model
  std::string id;
  // Disaggregated serving (--role). vLLM's kv_transfer_params: prefill here
  // and hand the KV to a decoder (do_remote_decode), or take the prompt's KV
  // from a prefill worker (do_remote_prefill). SGLang's bootstrap fields:
  // the room a prefill replica computes and a decoder fetches.
  bool remote_decode = false;
  bool remote_prefill = false;
  std::optional<std::uint64_t> bootstrap_room;
  std::string bootstrap_host;
  std::uint16_t bootstrap_port = 0;
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
  if (auto params = body.find("kv_transfer_params"); params != body.end() && params->is_object()) {
    completion.remote_decode = params->value("do_remote_decode", false);
    completion.remote_prefill = params->value("do_remote_prefill", false);
    if (completion.remote_prefill &&
        !(params->contains("remote_block_ids") && (*params)["remote_block_ids"].is_array())) {
      return std::string("kv_transfer_params.do_remote_prefill needs remote_block_ids");
    }
  }
  if (auto room = body.find("bootstrap_room"); room != body.end() && !room->is_null()) {
    if (!room->is_number_unsigned() || !body.contains("bootstrap_host") || !body["bootstrap_host"].is_string() ||
        !body.contains("bootstrap_port") || !body["bootstrap_port"].is_number_unsigned()) {
      return std::string("bootstrap_room needs a non-negative integer room, bootstrap_host and bootstrap_port");
    }
    completion.bootstrap_room = room->get<std::uint64_t>();
    completion.bootstrap_host = body["bootstrap_host"].get<std::string>();
    completion.bootstrap_port = body["bootstrap_port"].get<std::uint16_t>();
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

// llama-server's shapes (tools/server/server-task.cpp): keys in its order
// (ordered_json), a final chunk with an empty delta after the content, the
// usage chunk (choices empty) only when asked for, and `timings` (with
// cache_n, its prompt-cache hit) on whichever chunk comes last.
using OrderedJson = nlohmann::ordered_json;

struct RunTimes {
  double prompt_ms = 0;     // admission to the first token (model time)
  double predicted_ms = 0;  // first token to the last
};

OrderedJson llama_timings(const Completion& completion, std::uint32_t generated, std::uint32_t cached,
                          const RunTimes& times) {
  const auto prompt_n = completion.prompt.size() - std::min<std::size_t>(cached, completion.prompt.size());
  OrderedJson timings;
  timings["cache_n"] = cached;
  timings["prompt_n"] = prompt_n;
  timings["prompt_ms"] = times.prompt_ms;
  timings["prompt_per_token_ms"] = prompt_n > 0 ? times.prompt_ms / static_cast<double>(prompt_n) : 0.0;
  timings["prompt_per_second"] = times.prompt_ms > 0 ? 1e3 * static_cast<double>(prompt_n) / times.prompt_ms : 0.0;
  timings["predicted_n"] = generated;
  timings["predicted_ms"] = times.predicted_ms;
  timings["predicted_per_token_ms"] = generated > 0 ? times.predicted_ms / generated : 0.0;
  timings["predicted_per_second"] = times.predicted_ms > 0 ? 1e3 * generated / times.predicted_ms : 0.0;
  return timings;
}

OrderedJson llama_usage(const Completion& completion, std::uint32_t generated) {
  OrderedJson usage;
  usage["completion_tokens"] = generated;
  usage["prompt_tokens"] = completion.prompt.size();
  usage["total_tokens"] = completion.prompt.size() + generated;
  return usage;
}

OrderedJson llama_chunk(const Completion& completion, const std::string& model, OrderedJson choices) {
  OrderedJson chunk;
  chunk["choices"] = std::move(choices);
  chunk["created"] = 1700000000;
  chunk["id"] = completion.id;
  chunk["model"] = model;
  chunk["system_fingerprint"] = "b0-kvgate-sim";
  chunk["object"] = completion.chat ? "chat.completion.chunk" : "text_completion";
  return chunk;
}

// One streamed choice: the role announcement (no token), a token, or the
// closing one (finish_reason set, nothing new).
OrderedJson llama_choice(const Completion& completion, std::optional<std::uint32_t> token, bool closing) {
  OrderedJson choice;
  if (completion.chat) {
    choice["finish_reason"] = closing ? OrderedJson("length") : OrderedJson(nullptr);
    choice["index"] = 0;
    OrderedJson delta = OrderedJson::object();
    if (token) {
      delta["content"] = token_text(*token);
    } else if (!closing) {
      delta["role"] = "assistant";
      delta["content"] = nullptr;
    }
    choice["delta"] = std::move(delta);
  } else {
    choice["text"] = token ? token_text(*token) : "";
    choice["index"] = 0;
    choice["logprobs"] = nullptr;
    choice["finish_reason"] = closing ? OrderedJson("length") : OrderedJson(nullptr);
  }
  return choice;
}

std::vector<std::string> llama_closing_events(const Completion& completion, const std::string& model,
                                              std::uint32_t generated, std::uint32_t cached, const RunTimes& times) {
  std::vector<OrderedJson> chunks;
  chunks.push_back(llama_chunk(completion, model, OrderedJson::array({llama_choice(completion, {}, true)})));
  if (completion.include_usage) {
    auto usage = llama_chunk(completion, model, OrderedJson::array());
    usage["usage"] = llama_usage(completion, generated);
    chunks.push_back(std::move(usage));
  }
  chunks.back()["timings"] = llama_timings(completion, generated, cached, times);
  std::vector<std::string> events;
  for (const auto& chunk : chunks) {
    events.push_back(chunk.dump());
  }
  return events;
}

std::string llama_whole(const Completion& completion, const std::string& model, std::uint32_t generated,
                        std::uint32_t cached, const RunTimes& times) {
  std::string text;
  for (std::uint32_t index = 0; index < generated; ++index) {
    text += token_text(index);
  }
  OrderedJson choice;
  choice["finish_reason"] = "length";
  choice["index"] = 0;
  if (completion.chat) {
    choice["message"] = {{"role", "assistant"}, {"content", text}};
  } else {
    choice["text"] = text;
  }
  OrderedJson body;
  body["choices"] = OrderedJson::array({choice});
  body["created"] = 1700000000;
  body["model"] = model;
  body["system_fingerprint"] = "b0-kvgate-sim";
  body["object"] = completion.chat ? "chat.completion" : "text_completion";
  body["usage"] = llama_usage(completion, generated);
  body["id"] = completion.id;
  body["timings"] = llama_timings(completion, generated, cached, times);
  return body.dump();
}

awaitable<void> wait_signal(asio::steady_timer& signal) {
  co_await signal.async_wait(use_nothrow);
}

// A SGLang decoder's fetch of a bootstrap room from the prefill replica
// (GET /sim/bootstrap/<room>, which waits for the room's prefill): the
// prompt tokens whose KV it holds; nullopt when the prefill failed or the
// replica cannot be reached.
awaitable<std::optional<std::uint32_t>> fetch_room(const std::string& host, std::uint16_t port, std::uint64_t room) {
  auto executor = co_await asio::this_coro::executor;
  tcp::resolver resolver(executor);
  auto [resolve_error, endpoints] = co_await resolver.async_resolve(host, std::to_string(port), use_nothrow);
  if (resolve_error) {
    co_return std::nullopt;
  }
  beast::tcp_stream stream(executor);
  stream.expires_after(std::chrono::seconds(60));
  auto [connect_error, endpoint] = co_await stream.async_connect(endpoints, use_nothrow);
  if (connect_error) {
    co_return std::nullopt;
  }
  bhttp::request<bhttp::empty_body> request{bhttp::verb::get, "/sim/bootstrap/" + std::to_string(room), 11};
  request.set(bhttp::field::host, host + ":" + std::to_string(port));
  auto [write_error, written] = co_await bhttp::async_write(stream, request, use_nothrow);
  if (write_error) {
    co_return std::nullopt;
  }
  beast::flat_buffer buffer;
  bhttp::response<bhttp::string_body> response;
  auto [read_error, read] = co_await bhttp::async_read(stream, buffer, response, use_nothrow);
  if (read_error || response.result() != bhttp::status::ok) {
    co_return std::nullopt;
  }
  auto answer = json::parse(response.body(), nullptr, false);
  if (!answer.is_object() || !answer.contains("tokens") || !answer["tokens"].is_number_unsigned()) {
    co_return std::nullopt;
  }
  co_return answer["tokens"].get<std::uint32_t>();
}

class CompletionRun {
 public:
  CompletionRun(SimServer& server, beast::tcp_stream& stream, Completion completion)
      : server_(server), stream_(stream), completion_(std::move(completion)), state_(stream.get_executor()) {}

  // False when the client left (the request was aborted in the engine).
  awaitable<bool> run(bool keep_alive) {
    started_ = std::chrono::steady_clock::now();
    NewRequest request{completion_.prompt, completion_.max_tokens,
                       server_.hash_seed_for(completion_.cache_salt, completion_.lora_name), completion_.cache_salt,
                       completion_.lora_name};
    const auto role = server_.options().role;
    prefills_for_decoder_ = role == SimRole::prefill && (completion_.remote_decode || completion_.bootstrap_room);
    if (prefills_for_decoder_) {
      // The decoder generates; this replica computes the prompt and its
      // first token only.
      completion_.max_tokens = 1;
      request.max_tokens = 1;
      if (completion_.bootstrap_room) {
        server_.open_room(*completion_.bootstrap_room);
      }
    }
    if (role != SimRole::prefill &&
        (completion_.remote_prefill || (role == SimRole::decode && completion_.bootstrap_room))) {
      const bool landed = co_await receive_kv(request);
      if (!landed) {
        co_return co_await refuse_unreachable_room(keep_alive);
      }
    }
    handle_ = server_.submit(std::move(request), state_);
    bool ok = false;
    if (completion_.stream) {
      ok = co_await stream_events(keep_alive);
    } else {
      ok = co_await answer_whole(keep_alive);
    }
    if (prefills_for_decoder_) {
      if (completion_.bootstrap_room) {
        server_.close_room(*completion_.bootstrap_room,
                           ok ? std::optional(static_cast<std::uint32_t>(completion_.prompt.size())) : std::nullopt);
      }
      server_.disaggregation().remote_prefills += ok ? 1 : 0;
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
  // A remotely prefilled request: the prompt's KV comes over the link (the
  // tokens this cache lacks, at --transfer-gbps) before the engine admits
  // it. vLLM's decode request says where the blocks are; a SGLang decoder
  // asks the prefill replica's bootstrap server for its room. False: the
  // room's prefill failed.
  awaitable<bool> receive_kv(NewRequest& request) {
    auto landed = static_cast<std::uint32_t>(completion_.prompt.size());
    if (!completion_.remote_prefill) {
      auto room =
          co_await fetch_room(completion_.bootstrap_host, completion_.bootstrap_port, *completion_.bootstrap_room);
      if (!room) {
        co_return false;
      }
      landed = std::min(*room, landed);
    }
    const auto held = std::min(server_.engine().cached_prefix_tokens(request.prompt, request.hash_seed), landed);
    const double model_ms = server_.transfer_ms(landed - held);
    auto& counters = server_.disaggregation();
    ++counters.transfers;
    counters.transferred_tokens += landed - held;
    counters.transfer_seconds += model_ms / 1000;
    asio::steady_timer transfer(stream_.get_executor(),
                                std::chrono::microseconds(static_cast<std::int64_t>(
                                    model_ms * 1000 / server_.options().time_scale * server_.fault().slow_factor)));
    co_await transfer.async_wait(use_nothrow);
    request.external_tokens = landed;
    co_return true;
  }

  awaitable<bool> refuse_unreachable_room(bool keep_alive) {
    auto response = error_response(server_, 500,
                                   "KV transfer failed: bootstrap room " + std::to_string(*completion_.bootstrap_room) +
                                       " was not prefilled by " + completion_.bootstrap_host,
                                   keep_alive);
    auto [error, written] = co_await bhttp::async_write(stream_, response, use_nothrow);
    co_return !error && keep_alive;
  }

  // vLLM's prefill answer names where its KV is, for the decoder to read.
  json transfer_params() const {
    json block_ids = json::array();
    const auto blocks = (completion_.prompt.size() + server_.options().block_size - 1) / server_.options().block_size;
    for (std::size_t block = 0; block < blocks; ++block) {
      block_ids.push_back(block);
    }
    return {{"do_remote_prefill", true},
            {"do_remote_decode", false},
            {"remote_block_ids", std::move(block_ids)},
            {"remote_engine_id", server_.options().id},
            {"remote_host", server_.options().host},
            {"remote_port", server_.options().port},
            {"tp_size", 1}};
  }

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
    Response response{bhttp::status::ok, 11};
    response.set(bhttp::field::content_type, "application/json");
    response.keep_alive(keep_alive);
    response.body() = llama_profile() ? llama_whole(completion_, server_.options().model, state_.generated,
                                                    state_.cached_tokens, times())
                                      : whole_body();
    response.prepare_payload();
    response.set(kReplicaHeader, server_.options().id);
    auto [error, written] = co_await bhttp::async_write(stream_, response, use_nothrow);
    co_return !error;
  }

  std::string whole_body() const {
    auto body = whole_json(completion_, server_.options().model, state_.generated, state_.cached_tokens);
    if (prefills_for_decoder_ && completion_.remote_decode) {
      body["kv_transfer_params"] = transfer_params();
    }
    return body.dump();
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
        const bool role_ok = co_await write_data(chunk_text({}, false));
        if (!role_ok) {
          co_return false;
        }
      }
      for (; sent < state_.generated && !(drop_after && sent >= *drop_after); ++sent) {
        auto last = sent + 1 == completion_.max_tokens;
        const bool ok = co_await write_data(chunk_text(sent, last));
        if (!ok) {
          co_return false;
        }
      }
    }
    if (llama_profile()) {
      for (const auto& event : llama_closing_events(completion_, server_.options().model, state_.generated,
                                                    state_.cached_tokens, times())) {
        co_await write_data(event);
      }
    } else if (completion_.include_usage) {
      auto usage = chunk_json(completion_, server_.options().model, {}, true);
      usage["choices"] = json::array();
      usage["usage"] = usage_json(completion_, state_.generated, state_.cached_tokens);
      co_await write_data(usage.dump());
    }
    co_await write_data("[DONE]");
    auto [last_error, last_bytes] = co_await asio::async_write(stream_, bhttp::make_chunk_last(), use_nothrow);
    co_return !last_error;
  }

  [[nodiscard]] bool llama_profile() const { return server_.options().profile == EngineProfile::llamacpp; }

  // A streamed event: llama.cpp closes with its own chunk, so its token
  // chunks never carry a finish_reason.
  std::string chunk_text(std::optional<std::uint32_t> token, bool last) const {
    if (llama_profile()) {
      return llama_chunk(completion_, server_.options().model,
                         OrderedJson::array({llama_choice(completion_, token, false)}))
          .dump();
    }
    return chunk_json(completion_, server_.options().model, token, last).dump();
  }

  RunTimes times() const {
    const auto now = std::chrono::steady_clock::now();
    const auto first = state_.generated > 0 ? state_.first_token_at : now;
    return {server_.model_seconds(first - started_) * 1e3, server_.model_seconds(now - first) * 1e3};
  }

  SimServer& server_;
  beast::tcp_stream& stream_;
  Completion completion_;
  ActiveRequest state_;
  RequestHandle handle_ = 0;
  std::chrono::steady_clock::time_point started_;
  bool prefills_for_decoder_ = false;
};

// The error response when the request cannot be served, else nothing.
std::optional<Response> validate_completion(SimServer& server, const Request& request, bool chat,
                                            Completion& completion) {
  const auto& options = server.options();
  const bool keep_alive = request.keep_alive();
  auto body = json::parse(request.body(), nullptr, false);
  if (body.is_discarded() || !body.is_object()) {
    return error_response(server, 400, "The request body is not a valid JSON object.", keep_alive);
  }
  auto model = body.value("model", std::string());
  auto served = [&](const std::string& name) {
    return std::find(options.lora_adapters.begin(), options.lora_adapters.end(), name) != options.lora_adapters.end();
  };
  std::string adapter_name = served(model) ? model : std::string();
  // SGLang's own ways: "lora_path" beside the base model, or "base:adapter".
  if (options.profile == EngineProfile::sglang) {
    const auto colon = model.rfind(':');
    if (body.contains("lora_path") && body["lora_path"].is_string() && model == options.model) {
      adapter_name = body["lora_path"].get<std::string>();
      if (!served(adapter_name)) {
        return error_response(server, 400, "Unknown lora_path `" + adapter_name + "`.", keep_alive, "lora_path");
      }
    } else if (colon != std::string::npos && model.substr(0, colon) == options.model &&
               served(model.substr(colon + 1))) {
      adapter_name = model.substr(colon + 1);
      model = options.model;
    }
  }
  // llama-server serves its one model whatever the request names.
  if (model != options.model && adapter_name.empty() && options.profile != EngineProfile::llamacpp) {
    return error_response(server, 404, "The model `" + model + "` does not exist.", keep_alive, "model");
  }
  completion.lora_name = adapter_name;
  completion.chat = chat;
  if (auto problem = read_completion(body, request.body(), server, completion)) {
    return error_response(server, 400, *problem, keep_alive);
  }
  if (completion.remote_decode && options.role == SimRole::decode) {
    return error_response(server, 400, "this replica decodes (--role decode): it does not prefill for others",
                          keep_alive, "kv_transfer_params");
  }
  if (completion.remote_prefill && options.role == SimRole::prefill) {
    return error_response(server, 400, "this replica prefills (--role prefill): it does not take remote KV", keep_alive,
                          "kv_transfer_params");
  }
  if (options.profile == EngineProfile::llamacpp) {
    // llama-server refuses a prompt its slot's context cannot hold (the
    // generation is cut at the context's end instead).
    if (completion.prompt.size() >= options.max_model_len) {
      nlohmann::ordered_json refusal;
      refusal["error"]["code"] = 400;
      refusal["error"]["message"] = "the request exceeds the available context size, try increasing it";
      refusal["error"]["type"] = "exceed_context_size_error";
      refusal["error"]["n_prompt_tokens"] = completion.prompt.size();
      refusal["error"]["n_ctx"] = options.max_model_len;
      Response response{bhttp::status::bad_request, 11};
      response.set(bhttp::field::content_type, "application/json; charset=utf-8");
      response.keep_alive(keep_alive);
      response.body() = refusal.dump();
      response.prepare_payload();
      return response;
    }
    return std::nullopt;
  }
  auto requested = completion.prompt.size() + completion.max_tokens;
  if (requested > options.max_model_len) {
    // vLLM's wording for an over-long request.
    auto message = "This model's maximum context length is " + std::to_string(options.max_model_len) +
                   " tokens. However, you requested " + std::to_string(requested) + " tokens (" +
                   std::to_string(completion.prompt.size()) + " in the messages, " +
                   std::to_string(completion.max_tokens) +
                   " in the completion). Please reduce the length of the messages or completion.";
    return error_response(server, 400, message, keep_alive);
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
    auto data = json::array({model});
    for (const auto& adapter : server.options().lora_adapters) {
      data.push_back({{"id", adapter},
                      {"object", "model"},
                      {"created", 1700000000},
                      {"owned_by", "vllm"},
                      {"root", "/adapters/" + adapter},
                      {"parent", server.options().model},
                      {"max_model_len", server.options().max_model_len}});
    }
    return json_response(200, {{"object", "list"}, {"data", data}}, keep_alive);
  }
  if (path == "/metrics") {
    Response response{bhttp::status::ok, 11};
    response.set(bhttp::field::content_type, "text/plain; version=0.0.4; charset=utf-8");
    response.keep_alive(keep_alive);
    response.body() = server.metrics_text();
    response.prepare_payload();
    return response;
  }
  if (path == "/props" && server.options().profile == EngineProfile::llamacpp) {
    // llama-server's GET /props, the fields a gateway reads.
    json props = {{"total_slots", server.options().limits.slots},
                  {"default_generation_settings", {{"n_ctx", server.options().max_model_len}}},
                  {"build_info", "kvgate-sim"}};
    return json_response(200, props, keep_alive);
  }
  if (path == "/reset_prefix_cache" && request.method() == bhttp::verb::post) {
    bool reset = server.reset_prefix_cache();
    return json_response(reset ? 200 : 409, {{"reset", reset}}, keep_alive);
  }
  return error_response(server, 404, "Not found: " + path, keep_alive);
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
    auto response =
        problem ? error_response(server, 400, *problem, keep_alive) : json_response(200, {{"ok", true}}, keep_alive);
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
  constexpr std::string_view kBootstrap = "/sim/bootstrap/";
  if (path != "/metrics" && server.fault().status) {
    auto status = *server.fault().status;
    if (server.fault().status_delay_ms > 0 && !path.starts_with(kBootstrap)) {
      asio::steady_timer delay(stream.get_executor(), std::chrono::milliseconds(server.fault().status_delay_ms));
      co_await delay.async_wait(use_nothrow);
    }
    auto response = error_response(server, status, "injected failure", keep_alive);
    co_return co_await send(stream, std::move(response));
  }
  if (path.starts_with(kBootstrap) && request.method() == bhttp::verb::get) {
    std::uint64_t room = 0;
    const auto digits = std::string_view(path).substr(kBootstrap.size());
    const auto [end, parse_error] = std::from_chars(digits.data(), digits.data() + digits.size(), room);
    if (parse_error != std::errc() || end != digits.data() + digits.size()) {
      co_return co_await send(stream, error_response(server, 400, "not a room number", keep_alive));
    }
    auto tokens = co_await server.await_room(room, std::chrono::seconds(30));
    auto response =
        tokens ? json_response(200, {{"room", room}, {"tokens", *tokens}}, keep_alive)
               : error_response(server, 404, "room " + std::to_string(room) + " was not prefilled here", keep_alive);
    co_return co_await send(stream, std::move(response));
  }
  // vLLM's render endpoints: the prompt's token ids as this replica would
  // compute them, nothing run (llm-d's picker tokenises through them).
  const bool chat_render = path == "/v1/chat/completions/render";
  if ((chat_render || path == "/v1/completions/render") && request.method() == bhttp::verb::post) {
    Completion completion;
    if (auto rejection = validate_completion(server, request, chat_render, completion)) {
      co_return co_await send(stream, std::move(*rejection));
    }
    json rendered = json::object();
    rendered["token_ids"] = completion.prompt;
    if (!chat_render) {
      rendered = json::array({std::move(rendered)});  // one entry per prompt
    }
    auto response = json_response(200, rendered, keep_alive);
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
