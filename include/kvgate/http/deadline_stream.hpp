#pragma once
// A TCP stream with a deadline, for the data plane's connections. Its reads,
// writes and connects fail with beast::error::timeout once the deadline has
// passed (the socket is closed then, as beast::tcp_stream closes it).
//
// Unlike beast::tcp_stream, setting, moving or clearing the deadline arms no
// timer: tcp_stream starts a timer wait with every operation and cancels it
// when the operation completes, and each cancelled wait completes through
// the scheduler, a visible share of a small request's CPU. Here one timer
// per io_context (DeadlineSweeper) watches every stream that has a deadline,
// armed for the earliest deadline it knew of when it last woke; it is moved
// only when a stream asks for an earlier one. A deadline never fires early.
//
// Threading: a stream, and the sweeper of its io_context, are used from the
// one thread that runs that io_context (the proxy's I/O threads). A stream
// must outlive its pending operations (a coroutine awaiting it owns it).
#include <boost/asio/append.hpp>
#include <boost/asio/connect.hpp>
#include <boost/asio/post.hpp>

#include <chrono>
#include <cstdint>

#include "kvgate/http/beast.hpp"

namespace kvgate::http {

class DeadlineStream;

class DeadlineSweeper : public asio::execution_context::service {
 public:
  using key_type = DeadlineSweeper;
  static inline asio::execution_context::id id;  // NOLINT(readability-identifier-naming): Asio's service key

  explicit DeadlineSweeper(asio::io_context& context);
  void shutdown() override;

  // `stream`'s deadline was set: watched until it passes or is cleared.
  void watch(DeadlineStream& stream);
  void forget(DeadlineStream& stream);
  // Streams with a deadline (tests).
  [[nodiscard]] std::size_t watched() const { return watched_; }

 private:
  using Clock = std::chrono::steady_clock;
  void arm(Clock::time_point at);
  void sweep();

  asio::steady_timer timer_;
  Clock::time_point armed_for_ = Clock::time_point::max();
  std::uint64_t generation_ = 0;  // of the pending wait: a cancelled one is ignored
  DeadlineStream* first_ = nullptr;
  std::size_t watched_ = 0;
};

class DeadlineStream {
 public:
  using executor_type = asio::any_io_executor;
  using Clock = std::chrono::steady_clock;

  explicit DeadlineStream(asio::io_context& context);
  explicit DeadlineStream(tcp::socket socket);
  ~DeadlineStream();
  DeadlineStream(const DeadlineStream&) = delete;
  DeadlineStream& operator=(const DeadlineStream&) = delete;

  executor_type get_executor() noexcept { return socket_.get_executor(); }
  tcp::socket& socket() noexcept { return socket_; }

  // Operations from now on fail once `duration` has passed.
  void expires_after(Clock::duration duration);
  void expires_never();
  // Whether the deadline passed (the socket was closed then).
  [[nodiscard]] bool timed_out() const { return timed_out_; }

  template <class MutableBuffers, class Token>
  auto async_read_some(const MutableBuffers& buffers, Token&& token) {
    return asio::async_initiate<Token, void(error_code, std::size_t)>(
        [this](auto handler, const MutableBuffers& pieces) {
          socket_.async_read_some(pieces, Completion<decltype(handler)>{this, std::move(handler)});
        },
        token, buffers);
  }
  template <class ConstBuffers, class Token>
  auto async_write_some(const ConstBuffers& buffers, Token&& token) {
    return asio::async_initiate<Token, void(error_code, std::size_t)>(
        [this](auto handler, const ConstBuffers& pieces) {
          socket_.async_write_some(pieces, Completion<decltype(handler)>{this, std::move(handler)});
        },
        token, buffers);
  }
  template <class Token>
  auto async_connect(const tcp::endpoint& endpoint, Token&& token) {
    return asio::async_initiate<Token, void(error_code)>(
        [this](auto handler, const tcp::endpoint& to) {
          if (timed_out_) {  // connecting would open the closed socket again
            asio::post(socket_.get_executor(), asio::append(std::move(handler), timeout_error()));
            return;
          }
          socket_.async_connect(to, [this, handler = std::move(handler)](error_code error) mutable {
            std::move(handler)(outcome(error));
          });
        },
        token, endpoint);
  }
  // Tries each resolved endpoint in turn, as asio::async_connect does.
  template <class Endpoints, class Token>
  auto async_connect(const Endpoints& endpoints, Token&& token) {
    return asio::async_initiate<Token, void(error_code, tcp::endpoint)>(
        [this](auto handler, const Endpoints& candidates) {
          if (timed_out_) {
            asio::post(socket_.get_executor(), asio::append(std::move(handler), timeout_error(), tcp::endpoint()));
            return;
          }
          asio::async_connect(socket_, candidates,
                              [this, handler = std::move(handler)](error_code error, tcp::endpoint to) mutable {
                                std::move(handler)(outcome(error), to);
                              });
        },
        token, endpoints);
  }

 private:
  friend class DeadlineSweeper;

  // An operation's error, told as a timeout when the deadline closed the
  // socket under it (aborted) or before it (bad descriptor).
  [[nodiscard]] error_code outcome(error_code error) const { return error && timed_out_ ? timeout_error() : error; }
  static error_code timeout_error() { return beast::error::timeout; }
  template <class Handler>
  struct Completion {
    DeadlineStream* stream;
    Handler handler;
    using executor_type = asio::associated_executor_t<Handler, asio::any_io_executor>;
    executor_type get_executor() const noexcept {
      return asio::get_associated_executor(handler, stream->socket_.get_executor());
    }
    using allocator_type = asio::associated_allocator_t<Handler>;
    allocator_type get_allocator() const noexcept { return asio::get_associated_allocator(handler); }
    using cancellation_slot_type = asio::associated_cancellation_slot_t<Handler>;
    cancellation_slot_type get_cancellation_slot() const noexcept {
      return asio::get_associated_cancellation_slot(handler);
    }
    void operator()(error_code error, std::size_t bytes) { std::move(handler)(stream->outcome(error), bytes); }
  };
  void expire();

  tcp::socket socket_;
  DeadlineSweeper& sweeper_;
  Clock::time_point deadline_ = Clock::time_point::max();
  bool timed_out_ = false;
  // The sweeper's list of streams with a deadline.
  DeadlineStream* previous_ = nullptr;
  DeadlineStream* next_ = nullptr;
  bool watched_ = false;
};

}  // namespace kvgate::http
