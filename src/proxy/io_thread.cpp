#include "kvgate/proxy/io_thread.hpp"

#include <spdlog/spdlog.h>

#include <boost/asio/detached.hpp>
#include <boost/asio/post.hpp>

#include "kvgate/proxy/client_session.hpp"

namespace kvgate::proxy {

using namespace kvgate::http;

namespace {

// Exceptions never cross the coroutine boundary by design (use_nothrow
// everywhere); this logs the impossible case instead of terminating.
void log_if_failed(const std::exception_ptr& failure, const char* what) {
  if (!failure) {
    return;
  }
  try {
    std::rethrow_exception(failure);
  } catch (const std::exception& error) {
    spdlog::error("{} ended with an exception: {}", what, error.what());
  }
}

}  // namespace

IoThread::IoThread(gateway::GatewayContext& context, AdmissionGate& admission, RequestStats& stats,
                   const config::Options& options)
    : context_(context),
      admission_(admission),
      pool_(io_, options.upstream.max_idle_connections, options.upstream.idle_connection_timeout),
      stats_(stats),
      table_(context.tables()),
      decision_log_(context.decision_logs()) {}

Result<tcp::endpoint, std::string> IoThread::bind(const tcp::endpoint& endpoint) {
  // SO_REUSEPORT: every I/O thread listens on the same port and the kernel
  // spreads new connections across them, so no thread hands sockets to
  // another and no accept lock exists.
  return open_listener(acceptor_, endpoint, /*reuse_port=*/true);
}

void IoThread::start_accepting() {
  asio::co_spawn(io_, accept_loop(), [](const std::exception_ptr& failure) { log_if_failed(failure, "accept loop"); });
}

awaitable<void> IoThread::accept_loop() {
  while (acceptor_.is_open()) {
    auto [error, socket] = co_await acceptor_.async_accept(use_nothrow);
    if (error == asio::error::operation_aborted || !acceptor_.is_open()) {
      co_return;
    }
    if (error) {
      // EMFILE and friends: log and keep accepting; the next accept may work.
      spdlog::warn("accept failed: {}", error.message());
      continue;
    }
    auto limit = table()->options->limits.max_connections;
    if (!context_.try_open_connection(limit)) {
      stats_.shared().connection_rejected();
      spdlog::warn("connection refused: max_connections ({}) reached", limit);
      continue;  // the socket closes here
    }
    auto session = std::make_unique<ClientSession>(*this, std::move(socket));
    asio::co_spawn(io_, ClientSession::run(std::move(session)),
                   [](const std::exception_ptr& failure) { log_if_failed(failure, "client session"); });
  }
}

void IoThread::stop_accepting() {
  asio::post(io_, [this] {
    error_code ignored;
    acceptor_.close(ignored);
  });
}

void IoThread::close_idle_connections() {
  asio::post(io_, [this] {
    // Copy: closing may end a session, which removes itself from the set.
    std::vector<ClientSession*> sessions(sessions_.begin(), sessions_.end());
    for (auto* session : sessions) {
      session->close_if_idle();
    }
  });
}

void IoThread::apply_pool_limits(std::uint32_t max_idle, Milliseconds idle_timeout) {
  asio::post(io_, [this, max_idle, idle_timeout] { pool_.set_limits(max_idle, idle_timeout); });
}

}  // namespace kvgate::proxy
