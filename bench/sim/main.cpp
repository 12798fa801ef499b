// kvgate-sim: a simulated vLLM replica (see README.md beside this file).
#include <boost/asio/signal_set.hpp>
#include <iostream>
#include <zmq.hpp>

#include "sim_server.hpp"

int main(int argc, char** argv) {
  using namespace kvgate;
  std::vector<std::string> args(argv + 1, argv + argc);
  if (!args.empty() && (args[0] == "--help" || args[0] == "-h")) {
    std::cout << sim::sim_usage();
    return 0;
  }
  sim::SimOptions options;
  if (auto problem = sim::parse_sim_options(args, options)) {
    std::cerr << "kvgate-sim: " << *problem << '\n' << sim::sim_usage();
    return 64;
  }
  std::shared_ptr<const prompt::ModelTokenizer> tokenizer;
  if (!options.tokenizer.empty()) {
    auto loaded = prompt::load_model_tokenizer(options.tokenizer);
    if (!loaded) {
      std::cerr << "kvgate-sim: tokenizer " << loaded.error() << '\n';
      return 2;
    }
    tokenizer = std::move(*loaded);
  }
  http::asio::io_context io{1};
  std::unique_ptr<sim::SimServer> server;
  try {
    server = std::make_unique<sim::SimServer>(io, options, tokenizer);
  } catch (const zmq::error_t& error) {
    std::cerr << "kvgate-sim: cannot bind " << options.kv_events_endpoint << ": " << error.what() << '\n';
    return 1;
  }
  auto bound = server->bind();
  if (!bound) {
    std::cerr << "kvgate-sim: " << bound.error() << '\n';
    return 1;
  }
  http::asio::signal_set signals(io, SIGTERM, SIGINT);
  signals.async_wait([&](const http::error_code&, int) { io.stop(); });
  server->start();
  // Scripts and tests wait for this line (same form as kvgate-test-upstream).
  std::cout << "listening " << options.host << ":" << bound->port() << std::endl;
  if (auto events = server->kv_events_endpoint(); !events.empty()) {
    std::cout << "kv-events " << events << std::endl;  // the real port when the flag said ":*"
  }
  if (auto replay = server->kv_events_replay_endpoint(); !replay.empty()) {
    std::cout << "kv-events-replay " << replay << std::endl;
  }
  io.run();
  return 0;
}
