// kvgate-test-upstream: a small, scriptable OpenAI-compatible upstream for
// kvgate's integration tests and proxy benchmark. It answers chat and text
// completions (streaming or not) with canned filler tokens, misbehaves on
// request (fault.hpp), and exposes what it saw under /control/*.
// Single-threaded: one io_context, one coroutine per connection.
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/signal_set.hpp>
#include <chrono>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>

#include "fault.hpp"
#include "kvgate/http/beast.hpp"

namespace {

using namespace kvgate::http;
using namespace boost::asio::experimental::awaitable_operators;
using nlohmann::json;
using Request = bhttp::request<bhttp::string_body>;

struct Stats {
  int requests = 0;
  int completed = 0;
  int aborted = 0;      // the client closed the connection before the answer ended
  int v1_requests = 0;  // every request under /v1/, whatever its path
  json last_request;
};

struct Upstream {
  explicit Upstream(asio::io_context& io) : io(io), release(io), change(io) {
    release.expires_at(std::chrono::steady_clock::time_point::max());
    change.expires_at(std::chrono::steady_clock::time_point::max());
  }
  asio::io_context& io;
  std::string id;
  std::string model = "test-model";
  bool healthy = true;
  Stats stats;
  asio::steady_timer release;  // cancelled to wake every held stream
  asio::steady_timer change;   // cancelled whenever stats change (long polls)

  void notify() {
    change.cancel();
    change.expires_at(std::chrono::steady_clock::time_point::max());
  }
  json stats_json() const {
    return {{"id", id},
            {"requests", stats.requests},
            {"completed", stats.completed},
            {"aborted", stats.aborted},
            {"v1_requests", stats.v1_requests}};
  }
};

// True when the peer closed; a peer that sends more bytes is still there, so
// this then waits until the other branch of a || completes and cancels it.
awaitable<bool> wait_for_close(tcp::socket& socket) {
  const bool closed = co_await wait_until_peer_closes(socket);
  if (closed) {
    co_return true;
  }
  asio::steady_timer forever(socket.get_executor(), std::chrono::steady_clock::time_point::max());
  co_await forever.async_wait(use_nothrow);
  co_return false;
}

awaitable<void> wait_timer(asio::steady_timer& timer) {
  co_await timer.async_wait(use_nothrow);
}

// Waits `delay`, or until `wake` fires when delay is zero; true when the
// client went away meanwhile.
awaitable<bool> pause_or_abort(beast::tcp_stream& stream, asio::steady_timer* wake, int delay_ms) {
  asio::steady_timer timer(stream.get_executor(), std::chrono::milliseconds(delay_ms));
  auto& socket = stream.socket();
  std::variant<bool, std::monostate> result;
  if (wake != nullptr) {
    result = co_await (wait_for_close(socket) || wait_timer(*wake));
  } else {
    result = co_await (wait_for_close(socket) || wait_timer(timer));
  }
  co_return result.index() == 0 && std::get<0>(result);
}

std::string token_text(int index) {
  return "tok" + std::to_string(index) + " ";
}

json usage(int prompt_tokens, int completion_tokens) {
  return {{"prompt_tokens", prompt_tokens},
          {"completion_tokens", completion_tokens},
          {"total_tokens", prompt_tokens + completion_tokens},
          {"prompt_tokens_details", {{"cached_tokens", 0}}}};
}

struct Completion {
  bool chat = true;
  bool stream = false;
  bool include_usage = false;
  int max_tokens = 4;
  int prompt_tokens = 0;
  std::string model;
  std::string id;
};

json event_json(const Completion& completion, int index, bool last) {
  json choice = {{"index", 0}, {"finish_reason", last ? json("length") : json(nullptr)}};
  if (completion.chat) {
    choice["delta"] = index < 0 ? json{{"role", "assistant"}, {"content", ""}} : json{{"content", token_text(index)}};
  } else {
    choice["text"] = index < 0 ? "" : token_text(index);
  }
  return {{"id", completion.id},
          {"object", completion.chat ? "chat.completion.chunk" : "text_completion"},
          {"created", 1700000000},
          {"model", completion.model},
          {"choices", json::array({choice})}};
}

json whole_json(const Completion& completion, const std::string& upstream_id) {
  std::string text;
  for (int index = 0; index < completion.max_tokens; ++index) {
    text += token_text(index);
  }
  json choice = {{"index", 0}, {"finish_reason", "length"}};
  if (completion.chat) {
    choice["message"] = {{"role", "assistant"}, {"content", text}};
  } else {
    choice["text"] = text;
    choice["logprobs"] = nullptr;
  }
  return {{"id", completion.id},
          {"object", completion.chat ? "chat.completion" : "text_completion"},
          {"created", 1700000000},
          {"model", completion.model},
          {"system_fingerprint", upstream_id},
          {"choices", json::array({choice})},
          {"usage", usage(completion.prompt_tokens, completion.max_tokens)}};
}

bhttp::response<bhttp::string_body> json_response(unsigned status, const json& body, bool keep_alive);

bhttp::response<bhttp::string_body> injected_error(int status, bool keep_alive) {
  json error = {{"message", "injected failure"}, {"type", "server_error"}, {"code", nullptr}};
  return json_response(static_cast<unsigned>(status), {{"error", error}}, keep_alive);
}

bhttp::response<bhttp::string_body> json_response(unsigned status, const json& body, bool keep_alive) {
  bhttp::response<bhttp::string_body> response{static_cast<bhttp::status>(status), 11};
  response.set(bhttp::field::content_type, "application/json");
  response.keep_alive(keep_alive);
  response.body() = body.dump();
  response.prepare_payload();
  return response;
}

class Connection {
 public:
  Connection(Upstream& upstream, tcp::socket socket) : upstream_(upstream), stream_(std::move(socket)) {}

  awaitable<void> serve() {
    for (;;) {
      auto request = co_await read_request(stream_, buffer_, 64 * 1024 * 1024);
      if (!request) {
        co_return;
      }
      const bool keep_going = co_await handle(*request);
      if (!keep_going) {
        co_return;
      }
    }
  }

 private:
  awaitable<bool> send(bhttp::response<bhttp::string_body> response) {
    response.set("x-upstream-id", upstream_.id);
    auto [error, written] = co_await bhttp::async_write(stream_, response, use_nothrow);
    co_return !error && response.keep_alive();
  }

  awaitable<bool> handle(Request& request) {
    auto target = std::string(request.target());
    auto path = target.substr(0, target.find('?'));
    if (path.starts_with("/control/")) {
      co_return co_await control(request, path, target);
    }
    if (target.starts_with("/v1/") || !target.starts_with("/")) {
      ++upstream_.stats.v1_requests;
    }
    if (path == "/v1/chat/completions" || path == "/v1/completions") {
      co_return co_await complete(request, path == "/v1/chat/completions");
    }
    // Built outside co_await: g++ 12 miscompiles braced JSON literals there.
    auto response = simple_answer(path, request.keep_alive());
    co_return co_await send(std::move(response));
  }

  bhttp::response<bhttp::string_body> simple_answer(const std::string& path, bool keep_alive) const {
    if (path == "/health") {
      return json_response(upstream_.healthy ? 200 : 503, json::object(), keep_alive);
    }
    if (path == "/v1/models") {
      json model = {{"id", upstream_.model}, {"object", "model"}, {"owned_by", "test"}};
      return json_response(200, {{"object", "list"}, {"data", json::array({model})}}, keep_alive);
    }
    return json_response(404, {{"error", {{"message", "no route " + path}}}}, keep_alive);
  }

  void remember(const Request& request) {
    json headers = json::object();
    for (const auto& field : request) {
      headers[std::string(field.name_string())] = std::string(field.value());
    }
    upstream_.stats.last_request = {{"method", std::string(request.method_string())},
                                    {"target", std::string(request.target())},
                                    {"headers", headers},
                                    {"body", request.body()}};
    ++upstream_.stats.requests;
    upstream_.notify();
  }

  void finished(bool aborted) {
    ++(aborted ? upstream_.stats.aborted : upstream_.stats.completed);
    upstream_.notify();
  }

  awaitable<bool> complete(Request& request, bool chat) {
    remember(request);
    auto fault = kvgate::testing::parse_fault(request["x-test-fault"]);
    auto body = json::parse(request.body(), nullptr, false);
    Completion completion;
    completion.chat = chat;
    completion.id = "cmpl-" + upstream_.id + "-" + std::to_string(upstream_.stats.requests);
    completion.prompt_tokens = static_cast<int>(request.body().size() / 4);
    if (body.is_object()) {
      completion.model = body.value("model", upstream_.model);
      completion.stream = body.value("stream", false);
      completion.max_tokens = body.value("max_tokens", 4);
      completion.include_usage = body.contains("stream_options") && body["stream_options"].is_object() &&
                                 body["stream_options"].value("include_usage", false);
    }
    if (fault.stall) {
      finished(co_await pause_or_abort(stream_, &upstream_.release, 0));
      co_return false;
    }
    if (fault.status) {
      finished(false);
      auto response = injected_error(*fault.status, request.keep_alive());
      co_return co_await send(std::move(response));
    }
    if (!completion.stream) {
      if (fault.delay_ms > 0) {
        const bool aborted = co_await pause_or_abort(stream_, nullptr, fault.delay_ms);
        if (aborted) {
          finished(true);
          co_return false;
        }
      }
      finished(false);
      auto response = json_response(200, whole_json(completion, upstream_.id), request.keep_alive());
      co_return co_await send(std::move(response));
    }
    co_return co_await stream_events(request, completion, fault);
  }

  awaitable<bool> write_event(const std::string& data) {
    auto text = "data: " + data + "\n\n";
    auto [error, written] = co_await asio::async_write(stream_, bhttp::make_chunk(asio::buffer(text)), use_nothrow);
    co_return !error;
  }

  awaitable<bool> stream_events(Request& request, const Completion& completion, const kvgate::testing::Fault& fault) {
    bhttp::response<bhttp::empty_body> header{bhttp::status::ok, 11};
    header.set(bhttp::field::content_type, "text/event-stream");
    header.set(bhttp::field::cache_control, "no-cache");
    header.set("x-upstream-id", upstream_.id);
    header.chunked(true);
    header.keep_alive(request.keep_alive());
    bhttp::response_serializer<bhttp::empty_body> serializer(header);
    auto [header_error, header_bytes] = co_await bhttp::async_write_header(stream_, serializer, use_nothrow);
    bool role_sent = false;
    if (!header_error && fault.hold_first && co_await pause_or_abort(stream_, &upstream_.release, 0)) {
      header_error = asio::error::operation_aborted;  // the client left while held
    }
    if (!header_error) {
      role_sent = co_await write_event(event_json(completion, -1, false).dump());
    }
    if (!role_sent) {
      finished(true);
      co_return false;
    }
    for (int index = 0; index < completion.max_tokens; ++index) {
      if (fault.drop_after && index == *fault.drop_after) {
        stream_.socket().set_option(asio::socket_base::linger(true, 0));  // RST, like a crashed engine
        finished(true);
        co_return false;
      }
      bool aborted = false;
      if (fault.hold_after && index == *fault.hold_after) {
        aborted = co_await pause_or_abort(stream_, &upstream_.release, 0);
      }
      if (!aborted && fault.delay_ms > 0) {
        aborted = co_await pause_or_abort(stream_, nullptr, fault.delay_ms);
      }
      if (aborted) {
        finished(true);
        co_return false;
      }
      if (!co_await write_event(event_json(completion, index, index + 1 == completion.max_tokens).dump())) {
        finished(true);
        co_return false;
      }
    }
    if (completion.include_usage) {
      auto final_event = event_json(completion, 0, true);
      final_event["choices"] = json::array();
      final_event["usage"] = usage(completion.prompt_tokens, completion.max_tokens);
      co_await write_event(final_event.dump());
    }
    co_await write_event("[DONE]");
    if (fault.hold_last && co_await pause_or_abort(stream_, &upstream_.release, 0)) {
      finished(true);
      co_return false;
    }
    auto [last_error, last_bytes] = co_await asio::async_write(stream_, bhttp::make_chunk_last(), use_nothrow);
    finished(false);
    co_return !last_error && request.keep_alive();
  }

  awaitable<bool> control(Request& request, const std::string& path, const std::string& target) {
    if (path == "/control/health") {
      auto body = json::parse(request.body(), nullptr, false);
      upstream_.healthy = body.is_object() && body.value("healthy", true);
    } else if (path == "/control/release") {
      upstream_.release.cancel();
      upstream_.release.expires_at(std::chrono::steady_clock::time_point::max());
    } else if (path == "/control/last_request") {
      co_return co_await send(json_response(200, upstream_.stats.last_request, request.keep_alive()));
    } else if (path == "/control/wait") {
      co_await wait_for_stats(target);
    }
    co_return co_await send(json_response(200, upstream_.stats_json(), request.keep_alive()));
  }

  // GET /control/wait?aborted=N&completed=N&requests=N&timeout_ms=T: returns
  // when every named counter reached its value, or at the timeout.
  awaitable<void> wait_for_stats(const std::string& target) {
    auto query_value = [&](const std::string& key) {
      auto at = target.find(key + "=");
      return at == std::string::npos ? -1 : std::stoi(target.substr(at + key.size() + 1));
    };
    auto deadline = std::chrono::steady_clock::now() +
                    std::chrono::milliseconds(query_value("timeout_ms") < 0 ? 5000 : query_value("timeout_ms"));
    auto reached = [&] {
      return upstream_.stats.aborted >= query_value("aborted") &&
             upstream_.stats.completed >= query_value("completed") &&
             upstream_.stats.requests >= query_value("requests");
    };
    asio::steady_timer timeout(upstream_.io, deadline);
    while (!reached() && std::chrono::steady_clock::now() < deadline) {
      co_await (wait_timer(upstream_.change) || wait_timer(timeout));
    }
  }

  Upstream& upstream_;
  beast::tcp_stream stream_;
  beast::flat_buffer buffer_;
};

awaitable<void> run_connection(Upstream& upstream, tcp::socket socket) {
  Connection connection(upstream, std::move(socket));
  co_await connection.serve();
}

awaitable<void> accept_loop(Upstream& upstream, tcp::acceptor& acceptor) {
  for (;;) {
    auto [error, socket] = co_await acceptor.async_accept(use_nothrow);
    if (error) {
      co_return;
    }
    socket.set_option(tcp::no_delay(true));
    asio::co_spawn(upstream.io, run_connection(upstream, std::move(socket)), [](const std::exception_ptr&) {});
  }
}

}  // namespace

int main(int argc, char** argv) {
  std::string host = "127.0.0.1";
  unsigned short port = 0;
  asio::io_context io{1};
  Upstream upstream(io);
  upstream.id = "upstream";
  for (int index = 1; index + 1 < argc; index += 2) {
    std::string flag = argv[index];
    std::string value = argv[index + 1];
    if (flag == "--port") {
      port = static_cast<unsigned short>(std::stoi(value));
    } else if (flag == "--host") {
      host = value;
    } else if (flag == "--id") {
      upstream.id = value;
    } else if (flag == "--model") {
      upstream.model = value;
    } else {
      std::cerr << "usage: kvgate-test-upstream [--host H] [--port P] [--id NAME] [--model NAME]\n";
      return 64;
    }
  }
  tcp::acceptor acceptor(io, tcp::endpoint(asio::ip::make_address(host), port));
  std::cout << "listening " << host << ":" << acceptor.local_endpoint().port() << std::endl;
  asio::signal_set signals(io, SIGTERM, SIGINT);
  signals.async_wait([&](const error_code&, int) { io.stop(); });
  asio::co_spawn(io, accept_loop(upstream, acceptor), [](const std::exception_ptr&) {});
  io.run();
  return 0;
}
