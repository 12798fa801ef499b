// DeadlineStream over real loopback sockets: operations fail with
// beast::error::timeout once the deadline passes, never because a deadline
// was moved later or cleared, and one sweeper per io_context keeps track of
// the streams with a deadline.
#include "kvgate/http/deadline_stream.hpp"

#include <gtest/gtest.h>

#include <array>
#include <chrono>
#include <memory>
#include <optional>
#include <string>

namespace kvgate::http {
namespace {

using namespace std::chrono_literals;

struct ReadResult {
  error_code error;
  std::size_t bytes = 0;
};

// A connected pair on 127.0.0.1: `stream` wraps one end, `peer` is the
// other; `read()` starts a read of up to one buffer, whose outcome lands in
// `result`.
struct Pair {
  explicit Pair(asio::io_context& io) : acceptor(io, tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0)), peer(io) {
    tcp::socket client(io);
    client.connect(acceptor.local_endpoint());
    acceptor.accept(peer);
    stream = std::make_unique<DeadlineStream>(std::move(client));
  }
  void read() {
    result.reset();
    stream->async_read_some(asio::buffer(buffer), [this](error_code error, std::size_t bytes) {
      result = ReadResult{error, bytes};
    });
  }
  [[nodiscard]] std::string text() const { return result ? std::string(buffer.data(), result->bytes) : ""; }

  tcp::acceptor acceptor;
  tcp::socket peer;
  std::unique_ptr<DeadlineStream> stream;
  std::array<char, 64> buffer{};
  std::optional<ReadResult> result;
};

// Runs handlers until `done` or a generous bound: the sweeper's timer may
// stay armed for a later deadline, so the context does not run out of work.
template <class Done>
void run_until(asio::io_context& io, Done done) {
  io.restart();
  const auto until = std::chrono::steady_clock::now() + 20s;
  while (!done() && std::chrono::steady_clock::now() < until) {
    io.run_one_for(100ms);
  }
}

// Sends `text` from the peer after `delay`.
void send_later(tcp::socket& peer, asio::steady_timer& timer, std::string text, std::chrono::milliseconds delay) {
  timer.expires_after(delay);
  timer.async_wait([&peer, text = std::move(text)](error_code) {
    error_code ignored;
    asio::write(peer, asio::buffer(text), ignored);
  });
}

TEST(DeadlineStream, AReadOnASilentPeerFailsWithTimeoutAndClosesTheSocket) {
  asio::io_context io;
  Pair pair(io);
  pair.stream->expires_after(50ms);
  pair.read();
  EXPECT_EQ(asio::use_service<DeadlineSweeper>(io).watched(), 1u);
  run_until(io, [&] { return pair.result.has_value(); });
  ASSERT_TRUE(pair.result.has_value());
  EXPECT_EQ(pair.result->error, beast::error::timeout);
  EXPECT_TRUE(pair.stream->timed_out());
  EXPECT_FALSE(pair.stream->socket().is_open());
  EXPECT_EQ(asio::use_service<DeadlineSweeper>(io).watched(), 0u);
  // A later operation is told the same, not "bad descriptor".
  pair.read();
  run_until(io, [&] { return pair.result.has_value(); });
  ASSERT_TRUE(pair.result.has_value());
  EXPECT_EQ(pair.result->error, beast::error::timeout);
}

TEST(DeadlineStream, ADeadlineMovedLaterOrClearedDoesNotFire) {
  asio::io_context io;
  Pair later(io);
  Pair cleared(io);
  // The sweeper is armed for 100 ms; it wakes then and finds nothing due.
  later.stream->expires_after(100ms);
  later.stream->expires_after(10s);
  cleared.stream->expires_after(100ms);
  cleared.stream->expires_never();
  later.read();
  cleared.read();
  asio::steady_timer first(io);
  asio::steady_timer second(io);
  send_later(later.peer, first, "late", 400ms);
  send_later(cleared.peer, second, "also late", 400ms);
  run_until(io, [&] { return later.result.has_value() && cleared.result.has_value(); });
  ASSERT_TRUE(later.result.has_value());
  ASSERT_TRUE(cleared.result.has_value());
  EXPECT_FALSE(later.result->error) << later.result->error.message();
  EXPECT_EQ(later.text(), "late");
  EXPECT_FALSE(cleared.result->error) << cleared.result->error.message();
  EXPECT_EQ(cleared.text(), "also late");
  EXPECT_FALSE(later.stream->timed_out());
  EXPECT_EQ(asio::use_service<DeadlineSweeper>(io).watched(), 1u);  // `later` still has its 10 s
}

TEST(DeadlineStream, AnEarlierDeadlineOnAnotherStreamIsNotHeldBackByALaterOne) {
  asio::io_context io;
  Pair slow(io);
  Pair fast(io);
  slow.stream->expires_after(60s);
  slow.read();
  fast.stream->expires_after(50ms);
  fast.read();
  run_until(io, [&] { return fast.result.has_value(); });
  ASSERT_TRUE(fast.result.has_value());
  EXPECT_EQ(fast.result->error, beast::error::timeout);
  EXPECT_FALSE(slow.result.has_value());
  EXPECT_FALSE(slow.stream->timed_out());
  EXPECT_TRUE(slow.stream->socket().is_open());
}

TEST(DeadlineStream, AWriteToAPeerThatNeverReadsTimesOut) {
  asio::io_context io;
  Pair pair(io);
  const std::string block(8u << 20, 'x');  // more than the socket buffers hold
  std::optional<error_code> written;
  pair.stream->expires_after(200ms);
  asio::async_write(*pair.stream, asio::buffer(block), [&written](error_code error, std::size_t) { written = error; });
  run_until(io, [&] { return written.has_value(); });
  ASSERT_TRUE(written.has_value());
  EXPECT_EQ(*written, beast::error::timeout);
}

TEST(DeadlineStream, ADestroyedStreamLeavesTheSweeperAndTheOthersRunOn) {
  asio::io_context io;
  Pair kept(io);
  auto& sweeper = asio::use_service<DeadlineSweeper>(io);
  {
    Pair dropped(io);
    dropped.stream->expires_after(20ms);
    kept.stream->expires_after(100ms);
    EXPECT_EQ(sweeper.watched(), 2u);
  }
  EXPECT_EQ(sweeper.watched(), 1u);
  kept.read();
  run_until(io, [&] { return kept.result.has_value(); });  // the sweeper wakes for the dropped stream's deadline first
  ASSERT_TRUE(kept.result.has_value());
  EXPECT_EQ(kept.result->error, beast::error::timeout);
  EXPECT_EQ(sweeper.watched(), 0u);
}

TEST(DeadlineStream, ConnectingAfterTheDeadlinePassedIsATimeout) {
  asio::io_context io;
  tcp::acceptor acceptor(io, tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0));
  DeadlineStream stream(io);
  stream.expires_after(10ms);
  asio::steady_timer wait(io);
  wait.expires_after(200ms);
  std::optional<error_code> connected;
  wait.async_wait([&](error_code) {
    stream.async_connect(acceptor.local_endpoint(), [&connected](error_code error) { connected = error; });
  });
  run_until(io, [&] { return connected.has_value(); });
  ASSERT_TRUE(connected.has_value());
  EXPECT_EQ(*connected, beast::error::timeout);
  EXPECT_FALSE(stream.socket().is_open());  // not opened again
  // Before the deadline, a connect succeeds and the deadline can be cleared.
  DeadlineStream fresh(io);
  fresh.expires_after(5s);
  std::optional<error_code> fresh_connected;
  fresh.async_connect(acceptor.local_endpoint(), [&](error_code error) {
    fresh_connected = error;
    fresh.expires_never();
  });
  run_until(io, [&] { return fresh_connected.has_value(); });
  ASSERT_TRUE(fresh_connected.has_value());
  EXPECT_FALSE(*fresh_connected) << fresh_connected->message();
}

}  // namespace
}  // namespace kvgate::http
