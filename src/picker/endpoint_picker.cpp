#include "kvgate/picker/endpoint_picker.hpp"

#include <grpcpp/grpcpp.h>
#include <grpcpp/health_check_service_interface.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <deque>
#include <mutex>
#include <optional>
#include <vector>

#include "envoy/service/ext_proc/v3/external_processor.grpc.pb.h"
#include "kvgate/core/clock.hpp"
#include "kvgate/gateway/context.hpp"
#include "kvgate/obs/exposition.hpp"
#include "kvgate/openai/request.hpp"
#include "kvgate/openai/usage_scan.hpp"
#include "kvgate/picker/ext_proc_messages.hpp"
#include "kvgate/proxy/admission_gate.hpp"
#include "kvgate/proxy/decision_record.hpp"
#include "kvgate/proxy/front_door.hpp"
#include "kvgate/route/inference_request.hpp"
#include "kvgate/route/router.hpp"

namespace kvgate::picker {

namespace {

constexpr std::string_view kServiceName = "envoy.service.ext_proc.v3.ExternalProcessor";

using Request = ext_proc::ProcessingRequest;
using Response = ext_proc::ProcessingResponse;

}  // namespace

PickerStats::PickerStats(prometheus::Registry& registry)
    : streams_(prometheus::BuildGauge()
                   .Name("kvgate_picker_streams")
                   .Help("Open ext_proc streams of the endpoint picker (one per HTTP request in flight)")
                   .Register(registry)
                   .Add({})),
      answers_(prometheus::BuildCounter()
                   .Name("kvgate_picker_answers_total")
                   .Help("The endpoint picker's answers: status 200 code picked, or the local reply it asked the "
                         "data plane for, by status and error code")
                   .Register(registry)),
      pick_seconds_(prometheus::BuildHistogram()
                        .Name("kvgate_picker_pick_seconds")
                        .Help("Time from a request's last body piece to the picker's answer (parse, tokenise, "
                              "decide, commit)")
                        .Register(registry)
                        .Add({}, prometheus::Histogram::BucketBoundaries{0.00005, 0.0001, 0.00025, 0.0005, 0.001,
                                                                         0.0025, 0.005, 0.01, 0.025, 0.05, 0.1})),
      protocol_errors_(prometheus::BuildCounter()
                           .Name("kvgate_picker_protocol_errors_total")
                           .Help("ext_proc streams the picker ended because the data plane broke the protocol")
                           .Register(registry)
                           .Add({})),
      served_elsewhere_(prometheus::BuildCounter()
                            .Name("kvgate_picker_served_elsewhere_total")
                            .Help("Responses the data plane reports having sent to another endpoint than the pick "
                                  "(a fallback)")
                            .Register(registry)
                            .Add({})) {
  auto& abandoned = prometheus::BuildCounter()
                        .Name("kvgate_picker_abandoned_total")
                        .Help(
                            "ext_proc streams that ended before their exchange did (the client left or the data "
                            "plane reset the stream), by how far it had got: request_body, picked, response")
                        .Register(registry);
  abandoned_ = {&abandoned.Add({{"phase", "request_body"}}), &abandoned.Add({{"phase", "picked"}}),
                &abandoned.Add({{"phase", "response"}})};
  answers_.Add({{"status", "200"}, {"code", "picked"}});
  for (const auto& error : openai::common_errors()) {
    answers_.Add({{"status", std::to_string(error.status)}, {"code", error.code.empty() ? error.type : error.code}});
  }
}

void PickerStats::answered(int status, std::string_view code) {
  answers_.Add({{"status", std::to_string(status)}, {"code", std::string(code)}}).Increment();
}

void PickerStats::picked(double seconds) {
  answered(200, "picked");
  pick_seconds_.Observe(seconds);
}

// One ext_proc stream: one HTTP request through the data plane. Owns the
// exchange (and so the attempt) from the pick to the response's end.
class PickerStream final : public grpc::ServerBidiReactor<Request, Response> {
 public:
  PickerStream(gateway::GatewayContext& context, proxy::AdmissionGate& admission, PickerStats& stats)
      : context_(context), admission_(admission), stats_(stats), body_(0) {
    stats_.stream_opened();
    // A stream counts as an open connection: the drain waits for it, and
    // limits.max_connections bounds both front doors together.
    counted_ = context_.try_open_connection(context_.table()->options->limits.max_connections);
    StartRead(&incoming_);
  }

  void OnReadDone(bool ok) override {
    std::lock_guard lock(mutex_);
    if (!ok) {
      // The data plane closed its side (the exchange is over), or the
      // stream broke (the client left).
      reads_done_ = true;
      note_abandoned();
      end_exchange();
      finish_when_written(grpc::Status::OK);
      return;
    }
    if (!finishing_) {
      handle(incoming_);
    }
    if (!finishing_) {
      StartRead(&incoming_);
    }
    write_next();
  }

  void OnWriteDone(bool ok) override {
    std::lock_guard lock(mutex_);
    writing_ = false;
    if (!ok) {
      outgoing_.clear();
    } else if (!outgoing_.empty()) {
      outgoing_.pop_front();
    }
    write_next();
  }

  void OnDone() override {
    {
      std::lock_guard lock(mutex_);
      note_abandoned();
      end_exchange();
    }
    stats_.stream_closed();
    if (counted_) {
      context_.close_connection();
    }
    delete this;
  }

 private:
  enum class Phase { request_headers, request_body, picked, response, answered_locally, ended };

  void handle(const Request& request) {
    if (phase_ == Phase::answered_locally || phase_ == Phase::ended) {
      // Pieces the data plane sent before it read the local reply (or
      // after the exchange ended): nothing is owed for them.
      return;
    }
    observability_ = request.observability_mode();
    if (request.has_protocol_config()) {
      const auto mode = request.protocol_config().request_body_mode();
      if (mode != ext_proc::FULL_DUPLEX_STREAMED && mode != ext_proc::NONE) {
        protocol_error("the picker needs request_body_mode FULL_DUPLEX_STREAMED");
        return;
      }
      response_body_streamed_ = request.protocol_config().response_body_mode() == ext_proc::FULL_DUPLEX_STREAMED;
    }
    switch (request.request_case()) {
      case Request::kRequestHeaders:
        if (phase_ != Phase::request_headers) {
          protocol_error("request headers twice");
          return;
        }
        on_request_headers(request);
        return;
      case Request::kRequestBody:
        if (phase_ != Phase::request_body) {
          protocol_error("a request body piece outside the request body");
          return;
        }
        on_request_body(request.request_body().body(), request.request_body().end_of_stream());
        return;
      case Request::kRequestTrailers:
        if (phase_ == Phase::request_body) {
          on_request_body({}, true);  // trailers end the body
        }
        send(trailers_answer(true));
        return;
      case Request::kResponseHeaders:
        on_response_headers(request);
        return;
      case Request::kResponseBody:
        on_response_body(request.response_body().body(), request.response_body().end_of_stream());
        return;
      case Request::kResponseTrailers:
        send(trailers_answer(false));
        end_exchange();
        return;
      case Request::REQUEST_NOT_SET:
        break;
    }
    protocol_error("a ProcessingRequest without a request");
  }

  void on_request_headers(const Request& request) {
    exchange_.table = context_.table();
    exchange_.started = std::chrono::steady_clock::now();
    const auto& options = *exchange_.table->options;
    auto head =
        read_request_head(request.request_headers(), options.limits.max_header_fields, options.limits.max_header_bytes);
    if (!head) {
      exchange_.request_id = proxy::make_request_id();
      answer_locally(head.error());
      return;
    }
    head_ = std::move(*head);
    if (!counted_) {
      exchange_.request_id = proxy::make_request_id();
      answer_locally(openai::overloaded(context_.draining() ? "The gateway is shutting down; retry elsewhere."
                                                            : "The gateway has too many open requests; retry later.",
                                        "too_many_connections", 1000));
      return;
    }
    auto client_id = head_.get("x-request-id");
    exchange_.request_id =
        proxy::is_acceptable_request_id(client_id) ? std::string(client_id) : proxy::make_request_id();
    exchange_.method = std::string(head_.method());
    exchange_.path = std::string(head_.path());
    exchange_.trace = parse_traceparent(head_.get("traceparent"));
    exchange_.explain = options.routing.receipt || head_.get("x-kvgate-explain") == "1";
    auto subset = read_subset_hint(request.metadata_context());
    if (!subset) {
      spdlog::warn("picker: request_id={}: {}", exchange_.request_id, subset.error());
      auto error = openai::invalid_request("The gateway's endpoint subset hint is malformed: " + subset.error(), {},
                                           "invalid_subset_hint");
      error.status = 500;
      error.type = "server_error";
      answer_locally(error);
      return;
    }
    subset_ = std::move(*subset);
    body_ = BodyAssembly(options.limits.max_body_bytes);
    if (head_.end_of_stream()) {
      pick();
    } else {
      phase_ = Phase::request_body;
    }
  }

  void on_request_body(std::string_view piece, bool end_of_stream) {
    switch (body_.append(piece, end_of_stream)) {
      case BodyAssembly::Step::more:
        return;
      case BodyAssembly::Step::too_large:
        answer_locally(openai::body_too_large(exchange_.table->options->limits.max_body_bytes));
        return;
      case BodyAssembly::Step::complete:
        pick();
        return;
    }
  }

  // The request is whole: classify, authenticate, prepare, admit, decide,
  // commit, answer (the proxy's request pipeline, without the forwarding).
  void pick() {
    const auto decided_from = std::chrono::steady_clock::now();
    const auto& table = *exchange_.table;
    const auto& path = exchange_.path;
    const bool chat = path == "/v1/chat/completions";
    const bool completions = path == "/v1/completions";
    if (!path.starts_with("/v1/")) {
      answer_locally(openai::not_found(path));
      return;
    }
    if ((chat || completions) && exchange_.method != "POST") {
      answer_locally(openai::method_not_allowed(exchange_.method, path));
      return;
    }
    auto identity = table.tenants->authenticate(head_.get("authorization"));
    if (!identity) {
      spdlog::info("picker: request_id={}: authentication failed: {}", exchange_.request_id,
                   tenant::to_string(identity.error()));
      answer_locally(openai::unauthorized());
      return;
    }
    exchange_.tenant = *identity;
    auto& body = body_.body();
    const route::ModelRoute* model = nullptr;
    std::optional<route::InferenceRequest> inference;
    if (chat || completions) {
      const auto& sources = table.options->sessions.key_from;
      const openai::SessionKeyInput keys{
          sources, openai::session_header_values(sources, [&](std::string_view name) { return head_.get(name); })};
      auto prepared = route::prepare_inference(
          table, body, chat ? openai::Endpoint::chat_completions : openai::Endpoint::completions, keys,
          *exchange_.tenant, local_now());
      if (!prepared) {
        const auto& [error, found] = prepared.error();
        if (found != nullptr) {
          exchange_.model = found->name;
          spdlog::info("picker: request_id={} model {}: {}", exchange_.request_id, found->name, error.message);
        }
        answer_locally(error);
        return;
      }
      inference.emplace(std::move(*prepared));
      model = inference->model;
      auto refused = admission_.check_rates(*exchange_.tenant, inference->prompt.input_tokens, monotonic_now_ms());
      if (refused) {
        const bool tokens = refused->reason == admission::RefusalReason::prompt_tokens_per_minute;
        exchange_.model = model->name;
        answer_locally(openai::rate_limited(std::string("Rate limit reached for ") +
                                                (tokens ? "prompt tokens" : "requests") + " per minute of tenant '" +
                                                exchange_.tenant->name + "'. Retry after the time in Retry-After.",
                                            tokens, refused->retry_after_ms));
        return;
      }
    } else {
      if (auto too_deep = openai::check_json_depth(body)) {
        answer_locally(*too_deep);
        return;
      }
      std::string named_model;
      model = proxy::model_for_passthrough(table, body, named_model);
      if (model == nullptr) {
        answer_locally(openai::model_not_found(named_model));
        return;
      }
    }
    exchange_.model = model->name;
    const auto session_key = inference ? inference->session_key() : std::nullopt;
    auto ticket = admission_.try_admit(exchange_.table, *model, *exchange_.tenant,
                                       session_key ? route::slot_hold_key(*session_key) : 0);
    if (!ticket) {
      answer_locally(openai::overloaded("The gateway's in-flight limits are reached; retry later.",
                                        std::string(admission::to_string(ticket.error().reason)),
                                        ticket.error().retry_after_ms));
      return;
    }
    ticket_ = std::move(*ticket);

    // The data plane's subset: the other workers are out of this pick.
    std::vector<std::size_t> excluded;
    if (subset_) {
      for (std::size_t at = 0; at < model->workers.size(); ++at) {
        const auto address = endpoint_of(*model, at);
        if (std::find(subset_->begin(), subset_->end(), address) == subset_->end()) {
          excluded.push_back(at);
        }
      }
    }
    const auto* prompt = inference ? &inference->prompt : nullptr;
    const auto key_source = inference ? inference->summary.session_key_source : std::string_view();
    route::RouteContext route_context{session_key, context_.next_decision_sequence(), excluded, monotonic_now_ms(),
                                      key_source};
    auto& router = context_.router();
    auto decision = router.decide(table, *model, prompt, route_context);
    if (session_key) {
      exchange_.session = std::string(*session_key);
      exchange_.session_source = key_source;
    }
    exchange_.decision_log = context_.decision_log();
    exchange_.route_model = model;
    if (!decision.worker) {
      exchange_.route = std::move(decision);
      answer_locally(openai::no_healthy_worker(model->name));
      return;
    }
    const auto chosen = *decision.worker;
    exchange_.dispatched_seconds = seconds_since_start();
    exchange_.attempt.emplace(router.commit(table, *model, decision, prompt, route_context));
    exchange_.worker = model->workers[chosen].state->id();
    if (exchange_.explain) {
      exchange_.receipt = route::route_receipt(*model, decision);
    }

    PickAnswer answer;
    answer.endpoints.push_back(endpoint_of(*model, chosen));
    if (decision.runner_up) {
      answer.endpoints.push_back(endpoint_of(*model, *decision.runner_up));
    }
    exchange_.route = std::move(decision);
    answer.set_headers.emplace_back("x-request-id", exchange_.request_id);
    if (const auto prefill_worker = exchange_.route->prefill_worker()) {
      // llm-d's disaggregation sidecar on the decoder runs the prefill
      // there first (vLLM's protocol), then the decode.
      const auto& prefill_route = model->workers[*prefill_worker];
      exchange_.prefill_worker = prefill_route.state->id();
      answer.set_headers.emplace_back("x-prefiller-host-port", prefill_route.options.endpoint.authority.to_string());
    }
    const auto& worker_options = model->workers[chosen].options;
    if (!worker_options.upstream_api_key.empty()) {
      answer.set_headers.emplace_back("authorization", "Bearer " + worker_options.upstream_api_key);
    } else if (table.tenants->authenticates()) {
      // A key kvgate checked is the tenant's, never the engine's.
      answer.remove_headers.emplace_back("authorization");
    }
    if (inference) {
      // The body changes the proxy makes, made here too: the tenant's salt,
      // and usage asked for on a stream that did not ask (removed again
      // from the response).
      exchange_.strip_usage_event =
          inference->summary.stream && !inference->summary.include_usage && !model->streams_carry_timings;
      if (exchange_.strip_usage_event) {
        body = openai::with_stream_usage(body);
      }
      if (!inference->cache_salt_override.empty()) {
        body = openai::with_cache_salt(body, inference->cache_salt_override, inference->summary.has_cache_salt_member);
      }
    }
    if (!head_.end_of_stream()) {
      answer.set_headers.emplace_back("content-length", std::to_string(body.size()));
    }
    send(pick_answer(answer));
    if (!head_.end_of_stream()) {
      std::vector<Response> pieces;
      append_request_body(body, pieces);
      for (auto& piece : pieces) {
        send(std::move(piece));
      }
    }
    body.clear();
    body.shrink_to_fit();
    phase_ = Phase::picked;
    stats_.picked(std::chrono::duration<double>(std::chrono::steady_clock::now() - decided_from).count());
  }

  static std::string endpoint_of(const route::ModelRoute& model, std::size_t worker) {
    return model.workers[worker].options.endpoint.authority.to_string();
  }

  void on_response_headers(const Request& request) {
    if (phase_ != Phase::picked) {
      protocol_error("response headers before a pick");
      return;
    }
    phase_ = Phase::response;
    const auto& headers = request.response_headers();
    exchange_.status = response_status(headers);
    exchange_.first_byte_seconds = seconds_since_start();
    event_stream_ = response_media_type(headers) == "text/event-stream";
    if (!event_stream_) {
      exchange_.attempt->answering();
    }
    // The decoder answers once the prefill worker has handed the KV over.
    exchange_.attempt->end_prefill(route::AttemptEnd::served, workers::FailureCause::none, monotonic_now_ms());
    auto served = served_endpoint(request);
    if (!served.empty() && exchange_.route_model != nullptr &&
        served != endpoint_of(*exchange_.route_model, *exchange_.route->worker)) {
      stats_.served_elsewhere();
      spdlog::info("picker: request_id={} served by {} instead of the pick", exchange_.request_id, served);
    }
    std::vector<std::pair<std::string, std::string>> add{{"x-kvgate-worker", exchange_.worker},
                                                         {"x-request-id", exchange_.request_id}};
    if (!exchange_.receipt.empty()) {
      add.emplace_back("x-kvgate-route", exchange_.receipt);
    }
    send(response_headers_answer(add));
    if (headers.end_of_stream() || !response_body_streamed_) {
      // No body comes through the picker: the header is all it sees.
      exchange_.engine_done = headers.end_of_stream();
      if (headers.end_of_stream()) {
        end_exchange();
      }
    }
  }

  void on_response_body(std::string_view piece, bool end_of_stream) {
    if (phase_ != Phase::response) {
      protocol_error("a response body piece before the response headers");
      return;
    }
    if (event_stream_ && !piece.empty() && exchange_.first_token_seconds < 0) {
      exchange_.first_token_seconds = seconds_since_start();
      exchange_.attempt->first_token(exchange_.first_token_seconds - exchange_.dispatched_seconds);
    }
    exchange_.response_bytes += piece.size();
    usage_.feed(piece);
    if (end_of_stream) {
      usage_.finish();
      exchange_.engine_done = true;
    }
    exchange_.reported = usage_.usage();
    if (exchange_.strip_usage_event && event_stream_) {
      stripped_.clear();
      stripper_.feed(piece, stripped_);
      if (end_of_stream) {
        stripper_.finish(stripped_);
      }
      send(response_body_answer(stripped_, end_of_stream));
    } else {
      send(response_body_answer(piece, end_of_stream));
    }
    if (end_of_stream) {
      end_exchange();
    }
  }

  double seconds_since_start() const {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - exchange_.started).count();
  }

  // A local reply: the data plane answers the client with it and sends
  // nothing upstream; the stream has nothing more to do.
  void answer_locally(const openai::ApiError& error) {
    exchange_.status = error.status;
    exchange_.error_code = error.code.empty() ? error.type : error.code;
    stats_.answered(error.status, exchange_.error_code);
    send(immediate_answer(error));
    phase_ = Phase::answered_locally;
    ticket_.release();
    end_exchange();
  }

  void protocol_error(std::string_view what) {
    stats_.protocol_error();
    spdlog::warn("picker: request_id={}: protocol error: {}",
                 exchange_.request_id.empty() ? std::string_view("-") : std::string_view(exchange_.request_id), what);
    finish_when_written(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, std::string(what)));
  }

  // The exchange is over, whichever way: the attempt ends (served once the
  // engine answered; withdrawn when it never did) and the outcome is
  // recorded once, as the proxy records it.
  // Counted once, where the stream ends with its exchange unfinished.
  void note_abandoned() {
    using At = PickerStats::AbandonedAt;
    switch (phase_) {
      case Phase::request_body:
        stats_.abandoned(At::request_body);
        break;
      case Phase::picked:
        stats_.abandoned(At::picked);
        break;
      case Phase::response:
        // Without the response body the stream's end is the exchange's.
        if (response_body_streamed_) {
          stats_.abandoned(At::response);
        }
        break;
      case Phase::request_headers:
      case Phase::answered_locally:
      case Phase::ended:
        break;
    }
  }

  void end_exchange() {
    if (phase_ == Phase::ended || phase_ == Phase::request_headers || !exchange_.table) {
      phase_ = Phase::ended;
      return;
    }
    const bool routed = exchange_.attempt.has_value();
    if (routed) {
      const bool answered = phase_ == Phase::response;
      exchange_.client_gone = !exchange_.engine_done && answered;
      if (answered) {
        exchange_.attempt->engine_done(monotonic_now_ms(),
                                       {exchange_.engine_done ? exchange_.status : 0, exchange_.reported.prompt_tokens,
                                        exchange_.reported.completion_tokens, exchange_.reported.cached_tokens});
        const bool refused = exchange_.status >= 400 && exchange_.first_token_seconds < 0;
        std::optional<workers::FailureCause> traffic = workers::FailureCause::none;
        if (exchange_.status >= 500 || exchange_.status == 0) {
          traffic = workers::FailureCause::status_5xx;
        }
        if (exchange_.client_gone) {
          traffic.reset();  // a client that left says nothing about the worker
        }
        exchange_.attempt->end(refused ? route::AttemptEnd::not_run : route::AttemptEnd::served, traffic,
                               monotonic_now_ms());
      } else {
        // Picked, and the stream ended before any response: the data plane
        // could not reach the worker or the client left first; the
        // attempt is withdrawn (destroyed without end).
        exchange_.client_gone = true;
        exchange_.attempt.reset();
      }
    }
    exchange_.total_seconds = seconds_since_start();
    proxy::record_outcome(context_, exchange_);
    if (routed && exchange_.route_model != nullptr && exchange_.route && exchange_.route->worker) {
      exchange_.route_model->workers[*exchange_.route->worker].state->series().request_finished(
          exchange_.status, exchange_.first_token_seconds);
    }
    ticket_.release();
    phase_ = Phase::ended;
  }

  void send(Response response) {
    if (observability_) {
      return;  // the data plane ignores answers in observability mode
    }
    outgoing_.push_back(std::move(response));
    write_next();
  }

  void finish_when_written(grpc::Status status) {
    if (!finishing_) {
      finishing_ = true;
      finish_status_ = std::move(status);
    }
    write_next();
  }

  void write_next() {
    if (writing_) {
      return;
    }
    if (!outgoing_.empty()) {
      writing_ = true;
      StartWrite(&outgoing_.front());
      return;
    }
    if (finishing_ && !finished_) {
      finished_ = true;
      Finish(finish_status_);
    }
  }

  gateway::GatewayContext& context_;
  proxy::AdmissionGate& admission_;
  PickerStats& stats_;

  std::mutex mutex_;  // everything below; gRPC may run a read and a write completion at once
  Request incoming_;
  std::deque<Response> outgoing_;  // the front is being written while writing_
  bool writing_ = false;
  bool reads_done_ = false;
  bool finishing_ = false;
  bool finished_ = false;
  grpc::Status finish_status_;
  bool observability_ = false;
  bool response_body_streamed_ = true;
  bool counted_ = false;  // holds one of the gateway's open connections

  Phase phase_ = Phase::request_headers;
  proxy::Exchange exchange_;
  RequestHead head_;
  std::optional<std::vector<std::string>> subset_;
  BodyAssembly body_;
  proxy::AdmissionTicket ticket_;
  bool event_stream_ = false;
  openai::UsageScanner usage_;
  openai::UsageEventStripper stripper_;
  std::string stripped_;
};

class EndpointPicker::Service final : public ext_proc::ExternalProcessor::CallbackService {
 public:
  Service(gateway::GatewayContext& context, proxy::AdmissionGate& admission, PickerStats& stats)
      : context_(context), admission_(admission), stats_(stats) {}

  grpc::ServerBidiReactor<Request, Response>* Process(grpc::CallbackServerContext* /*call*/) override {
    return new PickerStream(context_, admission_, stats_);  // deletes itself in OnDone
  }

 private:
  gateway::GatewayContext& context_;
  proxy::AdmissionGate& admission_;
  PickerStats& stats_;
};

EndpointPicker::EndpointPicker(gateway::GatewayContext& context, proxy::AdmissionGate& admission)
    : context_(context),
      admission_(admission),
      stats_(context.exposition().registry()),
      service_(std::make_unique<Service>(context, admission, stats_)) {}

EndpointPicker::~EndpointPicker() {
  shutdown(0);
}

Result<int, std::string> EndpointPicker::start(const HostPort& address) {
  grpc::EnableDefaultHealthCheckService(true);
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort(address.to_string(), grpc::InsecureServerCredentials(), &port);
  builder.RegisterService(service_.get());
  // Request bodies come in pieces the data plane sizes; answers carry them
  // back in pieces of kBodyChunkBytes. Nothing larger is expected, but a
  // data plane with bigger pieces must not be refused.
  builder.SetMaxReceiveMessageSize(64 * 1024 * 1024);
  server_ = builder.BuildAndStart();
  if (!server_ || port == 0) {
    server_.reset();
    return unexpected("cannot listen for the endpoint picker on " + address.to_string());
  }
  auto* health = server_->GetHealthCheckService();
  health->SetServingStatus("liveness", true);
  health->SetServingStatus("readiness", true);
  health->SetServingStatus(std::string(kServiceName), true);
  return port;
}

void EndpointPicker::start_draining() {
  if (server_) {
    auto* health = server_->GetHealthCheckService();
    health->SetServingStatus("readiness", false);
    health->SetServingStatus(std::string(kServiceName), false);
  }
}

void EndpointPicker::shutdown(std::uint64_t grace_ms) {
  if (server_) {
    server_->Shutdown(std::chrono::system_clock::now() + std::chrono::milliseconds(grace_ms));
    server_->Wait();
    server_.reset();
  }
}

}  // namespace kvgate::picker
