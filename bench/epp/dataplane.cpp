// kvgate-epp-dataplane: Envoy's part in front of an endpoint picker, for
// benchmarks (no Envoy package in Debian 12). An HTTP/1.1 server that, for
// each request, asks the picker over ext_proc where it goes (headers, then
// the body), sends the body the picker returns to the picked endpoint with
// the picker's header changes, and streams the endpoint's response back to
// the client through the picker (each piece as the picker returns it), as
// Envoy's ext_proc filter does with FULL_DUPLEX_STREAMED bodies and an
// ORIGINAL_DST cluster keyed on x-gateway-destination-endpoint. One thread
// per client connection; a connection to the endpoint per request.
//
//   kvgate-epp-dataplane --picker 127.0.0.1:9002 [--port 0]
//   prints "listening 127.0.0.1:PORT" once it accepts connections.
#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include <cstdlib>
#include <iostream>
#include <string>
#include <thread>

#include "envoy_stream.hpp"

namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;
using kvgate::epp::EnvoyStream;
using kvgate::epp::HeaderList;

bool hop_by_hop(std::string_view name) {
  for (std::string_view hop : {"connection", "keep-alive", "transfer-encoding", "te", "upgrade", "content-length",
                               "proxy-connection", "host"}) {
    if (beast::iequals(name, hop)) {
      return true;
    }
  }
  return false;
}

void reply(tcp::socket& client, unsigned status, std::string_view content_type, std::string body, bool keep_alive) {
  http::response<http::string_body> response{static_cast<http::status>(status), 11};
  response.set(http::field::content_type, content_type);
  response.body() = std::move(body);
  response.keep_alive(keep_alive);
  response.prepare_payload();
  beast::error_code ignored;
  http::write(client, response, ignored);
}

// One request through the picker and its endpoint. False: the connection
// cannot serve another request.
bool serve(tcp::socket& client, const http::request<http::string_body>& request,
           kvgate::epp::ext_proc::ExternalProcessor::Stub& picker) {
  HeaderList headers{{":method", std::string(request.method_string())},
                     {":path", std::string(request.target())},
                     {":authority", std::string(request[http::field::host])}};
  for (const auto& field : request) {
    if (!hop_by_hop(field.name_string())) {
      std::string name(field.name_string());
      for (auto& c : name) {
        c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      }
      headers.emplace_back(std::move(name), std::string(field.value()));
    }
  }
  EnvoyStream stream(picker, std::chrono::minutes(10));
  auto answer = stream.send_request(headers, request.body());
  if (!answer.stream_ok) {
    reply(client, 500, "text/plain", "endpoint picker: " + answer.error, request.keep_alive());
    return request.keep_alive();
  }
  if (answer.immediate) {
    const auto& immediate = *answer.immediate;
    http::response<http::string_body> response{static_cast<http::status>(immediate.status().code()), 11};
    for (const auto& option : immediate.headers().set_headers()) {
      response.set(option.header().key(), kvgate::epp::value_of(option.header()));
    }
    response.body() = immediate.body();
    response.keep_alive(request.keep_alive());
    response.prepare_payload();
    beast::error_code ignored;
    http::write(client, response, ignored);
    stream.finish();
    return request.keep_alive();
  }
  const auto endpoint = answer.endpoint();
  const auto colon = endpoint.rfind(':');
  asio::io_context io;
  tcp::socket upstream(io);
  beast::error_code error;
  tcp::resolver resolver(io);
  auto resolved = resolver.resolve(endpoint.substr(0, colon), endpoint.substr(colon + 1), error);
  if (!error) {
    asio::connect(upstream, resolved, error);
  }
  if (error) {
    reply(client, 503, "text/plain", "upstream connect error: " + error.message(), request.keep_alive());
    stream.cancel();
    return request.keep_alive();
  }
  http::request<http::string_body> forwarded{request.method(), request.target(), 11};
  for (const auto& field : request) {
    if (!hop_by_hop(field.name_string())) {
      forwarded.set(field.name_string(), field.value());
    }
  }
  for (const auto& name : answer.remove_headers) {
    forwarded.erase(name);
  }
  for (const auto& [name, value] : answer.set_headers) {
    if (name != "content-length") {
      forwarded.set(name, value);
    }
  }
  forwarded.set(http::field::host, endpoint);
  forwarded.body() = answer.body;
  forwarded.keep_alive(false);
  forwarded.prepare_payload();
  http::write(upstream, forwarded, error);
  beast::flat_buffer buffer;
  http::response_parser<http::buffer_body> parser;
  parser.body_limit(boost::none);
  if (!error) {
    http::read_header(upstream, buffer, parser, error);
  }
  if (error) {
    reply(client, 502, "text/plain", "upstream error: " + error.message(), request.keep_alive());
    stream.cancel();
    return request.keep_alive();
  }
  const auto& head = parser.get();
  const auto content_type = std::string(head[http::field::content_type]);
  HeaderList more;
  auto added = stream.send_response_headers(head.result_int(), content_type, parser.is_done(), more);
  http::response<http::empty_body> client_head{head.result(), 11};
  for (const auto& field : head) {
    if (!hop_by_hop(field.name_string())) {
      client_head.set(field.name_string(), field.value());
    }
  }
  for (const auto& [name, value] : added.value_or(HeaderList{})) {
    client_head.set(name, value);
  }
  client_head.chunked(true);
  client_head.keep_alive(request.keep_alive());
  http::response_serializer<http::empty_body> serializer{client_head};
  http::write_header(client, serializer, error);
  char piece[16 * 1024];
  while (!error && !parser.is_done()) {
    parser.get().body().data = piece;
    parser.get().body().size = sizeof piece;
    http::read_some(upstream, buffer, parser, error);
    if (error == http::error::need_buffer) {
      error = {};
    }
    if (error) {
      break;
    }
    const std::size_t size = sizeof piece - parser.get().body().size;
    auto out = stream.send_response_body(std::string_view(piece, size), parser.is_done());
    if (!out) {
      error = asio::error::connection_aborted;
      break;
    }
    if (!out->empty()) {
      asio::write(client, http::make_chunk(asio::buffer(*out)), error);
    }
  }
  if (error) {
    stream.cancel();
    return false;  // the client's response is cut off: only closing says so
  }
  asio::write(client, http::make_chunk_last(), error);
  stream.finish();
  return !error && request.keep_alive();
}

void connection(tcp::socket client, kvgate::epp::ext_proc::ExternalProcessor::Stub& picker) {
  beast::flat_buffer buffer;
  for (;;) {
    http::request_parser<http::string_body> parser;
    parser.body_limit(64 * 1024 * 1024);
    beast::error_code error;
    http::read(client, buffer, parser, error);
    if (error) {
      return;
    }
    if (!serve(client, parser.get(), picker)) {
      return;
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  std::string picker_address;
  unsigned short port = 0;
  for (int at = 1; at + 1 < argc; at += 2) {
    std::string flag = argv[at];
    if (flag == "--picker") {
      picker_address = argv[at + 1];
    } else if (flag == "--port") {
      port = static_cast<unsigned short>(std::atoi(argv[at + 1]));
    } else {
      std::cerr << "usage: kvgate-epp-dataplane --picker HOST:PORT [--port N]\n";
      return 64;
    }
  }
  if (picker_address.empty()) {
    std::cerr << "usage: kvgate-epp-dataplane --picker HOST:PORT [--port N]\n";
    return 64;
  }
  grpc::ChannelArguments arguments;
  arguments.SetMaxReceiveMessageSize(64 * 1024 * 1024);
  auto channel = grpc::CreateCustomChannel(picker_address, grpc::InsecureChannelCredentials(), arguments);
  auto picker = kvgate::epp::ext_proc::ExternalProcessor::NewStub(channel);
  asio::io_context io;
  tcp::acceptor acceptor(io, tcp::endpoint(asio::ip::make_address("127.0.0.1"), port));
  std::cout << "listening 127.0.0.1:" << acceptor.local_endpoint().port() << std::endl;
  for (;;) {
    tcp::socket client(io);
    acceptor.accept(client);
    client.set_option(tcp::no_delay(true));
    std::thread(connection, std::move(client), std::ref(*picker)).detach();
  }
}
