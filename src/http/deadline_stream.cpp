#include "kvgate/http/deadline_stream.hpp"

#include <algorithm>

namespace kvgate::http {

namespace {

DeadlineSweeper& sweeper_of(const asio::any_io_executor& executor) {
  // The data plane's streams run on io_contexts (one per I/O thread).
  auto& context = static_cast<asio::io_context&>(asio::query(executor, asio::execution::context));
  return asio::use_service<DeadlineSweeper>(context);
}

}  // namespace

DeadlineSweeper::DeadlineSweeper(asio::io_context& context)
    : asio::execution_context::service(context), timer_(context) {}

void DeadlineSweeper::shutdown() {
  timer_.cancel();
}

void DeadlineSweeper::watch(DeadlineStream& stream) {
  if (!stream.watched_) {
    stream.watched_ = true;
    stream.previous_ = nullptr;
    stream.next_ = first_;
    if (first_ != nullptr) {
      first_->previous_ = &stream;
    }
    first_ = &stream;
    ++watched_;
  }
  if (stream.deadline_ < armed_for_) {
    arm(stream.deadline_);
  }
}

void DeadlineSweeper::forget(DeadlineStream& stream) {
  if (!stream.watched_) {
    return;
  }
  stream.watched_ = false;
  (stream.previous_ != nullptr ? stream.previous_->next_ : first_) = stream.next_;
  if (stream.next_ != nullptr) {
    stream.next_->previous_ = stream.previous_;
  }
  stream.previous_ = stream.next_ = nullptr;
  --watched_;
  // The timer stays armed: it wakes once, finds nothing due, and sleeps
  // until the next deadline (or for good).
}

void DeadlineSweeper::arm(Clock::time_point at) {
  armed_for_ = at;
  const std::uint64_t generation = ++generation_;
  timer_.expires_at(at);  // cancels the earlier wait, whose handler then sees an old generation
  timer_.async_wait([this, generation](error_code) {
    if (generation == generation_) {
      sweep();
    }
  });
}

void DeadlineSweeper::sweep() {
  armed_for_ = Clock::time_point::max();
  const auto now = Clock::now();
  auto earliest = Clock::time_point::max();
  for (DeadlineStream* stream = first_; stream != nullptr;) {
    DeadlineStream* next = stream->next_;
    if (stream->deadline_ <= now) {
      forget(*stream);
      stream->expire();
    } else {
      earliest = std::min(earliest, stream->deadline_);
    }
    stream = next;
  }
  if (earliest != Clock::time_point::max()) {
    arm(earliest);
  }
}

DeadlineStream::DeadlineStream(asio::io_context& context)
    : socket_(context), sweeper_(asio::use_service<DeadlineSweeper>(context)) {}

DeadlineStream::DeadlineStream(tcp::socket socket)
    : socket_(std::move(socket)), sweeper_(sweeper_of(socket_.get_executor())) {}

DeadlineStream::~DeadlineStream() {
  sweeper_.forget(*this);
}

void DeadlineStream::expires_after(Clock::duration duration) {
  deadline_ = Clock::now() + duration;
  sweeper_.watch(*this);
}

void DeadlineStream::expires_never() {
  deadline_ = Clock::time_point::max();
  sweeper_.forget(*this);
}

void DeadlineStream::expire() {
  timed_out_ = true;
  deadline_ = Clock::time_point::max();
  error_code ignored;
  socket_.close(ignored);  // pending operations complete, aborted (told as a timeout)
}

}  // namespace kvgate::http
