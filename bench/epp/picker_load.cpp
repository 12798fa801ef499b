// kvgate-epp-load: the endpoint picker's own cost, measured from the data
// plane's side. Each request is one ext_proc stream: the request headers,
// the body in Envoy's 64 KiB pieces, then reading the pick and the body
// streamed back (the exchange then ends without a response: the attempt
// is withdrawn). Reports the client's latency per pick and, from the
// gateway's kvgate_picker_pick_seconds histogram over the same run, the
// time the gateway spent deciding (parse, tokenise, decide, commit): the
// difference is what the picker adds to the routing decision.
//
//   kvgate-epp-load --picker 127.0.0.1:9002 --admin 127.0.0.1:9090
//                   --prompt-tokens 32768 --count 2000 --concurrency 1
//   prints one JSON object.
#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <iostream>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "envoy_stream.hpp"

namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using Clock = std::chrono::steady_clock;

std::string http_get(const std::string& address, const std::string& target) {
  asio::io_context io;
  asio::ip::tcp::socket socket(io);
  const auto colon = address.rfind(':');
  asio::ip::tcp::resolver resolver(io);
  asio::connect(socket, resolver.resolve(address.substr(0, colon), address.substr(colon + 1)));
  http::request<http::empty_body> request{http::verb::get, target, 11};
  request.set(http::field::host, address);
  http::write(socket, request);
  beast::flat_buffer buffer;
  http::response<http::string_body> response;
  http::read(socket, buffer, response);
  return response.body();
}

// kvgate_picker_pick_seconds' cumulative buckets (le -> count).
std::map<double, double> pick_histogram(const std::string& admin) {
  std::map<double, double> buckets;
  const auto text = http_get(admin, "/metrics");
  const std::string prefix = "kvgate_picker_pick_seconds_bucket{le=\"";
  for (auto at = text.find(prefix); at != std::string::npos; at = text.find(prefix, at + 1)) {
    const auto le_end = text.find('"', at + prefix.size());
    const auto le_text = text.substr(at + prefix.size(), le_end - at - prefix.size());
    const double le = le_text == "+Inf" ? INFINITY : std::stod(le_text);
    const auto value_at = text.find("} ", le_end) + 2;
    buckets[le] = std::stod(text.substr(value_at));
  }
  return buckets;
}

// The q-quantile of a cumulative histogram's difference, interpolated
// linearly inside the bucket (as Prometheus' histogram_quantile).
double histogram_quantile(const std::map<double, double>& before, const std::map<double, double>& after, double q) {
  std::vector<std::pair<double, double>> counts;
  for (const auto& [le, count] : after) {
    const auto old = before.find(le);
    counts.emplace_back(le, count - (old == before.end() ? 0 : old->second));
  }
  if (counts.empty() || counts.back().second <= 0) {
    return NAN;
  }
  const double rank = q * counts.back().second;
  double lower = 0;
  double below = 0;
  for (const auto& [le, count] : counts) {
    if (count >= rank) {
      if (std::isinf(le)) {
        return lower;
      }
      return lower + (le - lower) * (count - below <= 0 ? 1 : (rank - below) / (count - below));
    }
    lower = le;
    below = count;
  }
  return lower;
}

double percentile(std::vector<double> values, double q) {
  if (values.empty()) {
    return NAN;
  }
  std::sort(values.begin(), values.end());
  return values[std::min(values.size() - 1, static_cast<std::size_t>(q * static_cast<double>(values.size())))];
}

}  // namespace

int main(int argc, char** argv) {
  std::string picker_address;
  std::string admin;
  std::string model = "demo-model";
  std::size_t prompt_tokens = 32768;
  std::size_t count = 1000;
  std::size_t concurrency = 1;
  for (int at = 1; at + 1 < argc; at += 2) {
    const std::string flag = argv[at];
    const std::string value = argv[at + 1];
    if (flag == "--picker") {
      picker_address = value;
    } else if (flag == "--admin") {
      admin = value;
    } else if (flag == "--model") {
      model = value;
    } else if (flag == "--prompt-tokens") {
      prompt_tokens = std::stoul(value);
    } else if (flag == "--count") {
      count = std::stoul(value);
    } else if (flag == "--concurrency") {
      concurrency = std::max<std::size_t>(1, std::stoul(value));
    } else {
      std::cerr << "unknown flag " << flag << "\n";
      return 64;
    }
  }
  if (picker_address.empty() || admin.empty()) {
    std::cerr << "usage: kvgate-epp-load --picker HOST:PORT --admin HOST:PORT [--model M] [--prompt-tokens N] "
                 "[--count N] [--concurrency C]\n";
    return 64;
  }
  grpc::ChannelArguments arguments;
  arguments.SetMaxReceiveMessageSize(64 * 1024 * 1024);
  auto channel = grpc::CreateCustomChannel(picker_address, grpc::InsecureChannelCredentials(), arguments);
  auto stub = kvgate::epp::ext_proc::ExternalProcessor::NewStub(channel);
  // A system prompt of about `prompt_tokens` tokens (4 bytes a token in the
  // approximate tokenisation), distinct user turns so the prefix repeats.
  std::string system;
  for (std::size_t word = 0; system.size() < prompt_tokens * 4; ++word) {
    system += "w" + std::to_string(word % 9973) + " ";
  }
  const kvgate::epp::HeaderList headers{{":method", "POST"},
                                        {":path", "/v1/chat/completions"},
                                        {":authority", "gateway"},
                                        {"content-type", "application/json"}};
  const auto before = pick_histogram(admin);
  std::vector<std::vector<double>> latencies(concurrency);
  std::atomic<std::size_t> next{0};
  std::atomic<std::size_t> failed{0};
  const auto started = Clock::now();
  std::vector<std::thread> threads;
  for (std::size_t thread = 0; thread < concurrency; ++thread) {
    threads.emplace_back([&, thread] {
      for (auto number = next++; number < count; number = next++) {
        nlohmann::json body = {{"model", model},
                               {"max_tokens", 1},
                               {"messages",
                                {{{"role", "system"}, {"content", system}},
                                 {{"role", "user"}, {"content", "question " + std::to_string(number)}}}}};
        const auto text = body.dump();
        const auto pieces = std::max<std::size_t>(1, (text.size() + 65535) / 65536);
        const auto sent = Clock::now();
        kvgate::epp::EnvoyStream stream(*stub);
        auto answer = stream.send_request(headers, text, pieces);
        const auto answered = Clock::now();
        if (!answer.stream_ok || answer.immediate || answer.destination.empty()) {
          ++failed;
        } else {
          latencies[thread].push_back(std::chrono::duration<double, std::milli>(answered - sent).count());
        }
        stream.finish();
      }
    });
  }
  for (auto& thread : threads) {
    thread.join();
  }
  const double seconds = std::chrono::duration<double>(Clock::now() - started).count();
  const auto after = pick_histogram(admin);
  std::vector<double> all;
  for (const auto& each : latencies) {
    all.insert(all.end(), each.begin(), each.end());
  }
  nlohmann::json report = {
      {"prompt_tokens", prompt_tokens},
      {"requests", count},
      {"failed", failed.load()},
      {"concurrency", concurrency},
      {"picks_per_second", static_cast<double>(all.size()) / seconds},
      {"client_ms", {{"p50", percentile(all, 0.5)}, {"p99", percentile(all, 0.99)}}},
      {"decision_ms",
       {{"p50", histogram_quantile(before, after, 0.5) * 1000},
        {"p99", histogram_quantile(before, after, 0.99) * 1000}}},
  };
  std::cout << report.dump() << std::endl;
  return failed.load() == 0 ? 0 : 1;
}
