#include "kvgate/app/ordered_lines.hpp"

#include <algorithm>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <istream>
#include <mutex>
#include <optional>
#include <ostream>
#include <thread>
#include <utility>
#include <vector>

namespace kvgate::app {

namespace {

// The lines read and not yet written, by sequence number (the order of
// reading). A line is taken by one worker, completed by it, and written
// once it and every line before it are complete.
class Window {
 public:
  explicit Window(std::size_t capacity) : capacity_(std::max<std::size_t>(capacity, 1)) {}

  // Blocks while `capacity` lines are unwritten.
  void push(std::string text) {
    std::unique_lock lock(mutex_);
    space_.wait(lock, [&] { return lines_.size() < capacity_; });
    lines_.push_back(Line{std::move(text), {}, false});
    work_.notify_one();
  }

  void close() {
    const std::lock_guard lock(mutex_);
    closed_ = true;
    work_.notify_all();
  }

  struct Job {
    std::uint64_t sequence = 0;
    std::string text;
  };
  // The oldest line nobody has taken; none once the input is closed and
  // every line has been taken.
  std::optional<Job> take() {
    std::unique_lock lock(mutex_);
    work_.wait(lock, [&] { return next_take_ < end() || closed_; });
    if (next_take_ == end()) {
      return std::nullopt;
    }
    Line& line = lines_[next_take_ - first_];
    return Job{next_take_++, std::move(line.text)};
  }

  // Records a line's output; the caller then writes every completed line
  // from the oldest unwritten one on, unless another worker is writing
  // (it will find this line before it stops).
  void complete(std::uint64_t sequence, std::string out, std::ostream& output) {
    std::unique_lock lock(mutex_);
    Line& line = lines_[sequence - first_];
    line.out = std::move(out);
    line.done = true;
    if (writing_) {
      return;
    }
    writing_ = true;
    std::vector<std::string> ready;
    for (;;) {
      while (!lines_.empty() && lines_.front().done) {
        ready.push_back(std::move(lines_.front().out));
        lines_.pop_front();
        ++first_;
      }
      if (ready.empty()) {
        break;  // none left, or the oldest is still in a worker's hands
      }
      // Every line read so far is answered: the reader may be waiting for
      // input that depends on these answers (a program driving the command
      // a line at a time), so they leave the stream's buffer now. Under a
      // steady stream of input the window is rarely empty and writes stay
      // buffered.
      const bool caught_up = lines_.empty();
      space_.notify_one();
      lock.unlock();
      for (const std::string& text : ready) {
        output.write(text.data(), static_cast<std::streamsize>(text.size()));
      }
      if (caught_up) {
        output.flush();
      }
      ready.clear();
      lock.lock();
    }
    writing_ = false;
  }

 private:
  struct Line {
    std::string text;
    std::string out;  // with its newline
    bool done = false;
  };
  [[nodiscard]] std::uint64_t end() const { return first_ + lines_.size(); }

  const std::size_t capacity_;
  std::mutex mutex_;
  std::condition_variable work_;   // a line to take, or the input's end
  std::condition_variable space_;  // room in the window for the reader
  std::deque<Line> lines_;         // lines_[i] has sequence first_ + i
  std::uint64_t first_ = 0;
  std::uint64_t next_take_ = 0;
  bool closed_ = false;
  bool writing_ = false;  // one worker writes at a time, outside the lock
};

}  // namespace

void process_lines_in_order(std::istream& input, std::ostream& output, const OrderedLinesOptions& options,
                            const std::function<LineProcessor()>& make_processor) {
  std::ostream* const tied = input.tie(nullptr);
  Window window(options.window);
  {
    std::vector<std::jthread> workers;
    const unsigned threads = std::max(options.threads, 1U);
    workers.reserve(threads);
    for (unsigned index = 0; index < threads; ++index) {
      workers.emplace_back([&] {
        const LineProcessor process = make_processor();
        while (auto job = window.take()) {
          std::string out;
          process(job->text, out);
          out += '\n';
          window.complete(job->sequence, std::move(out), output);
        }
      });
    }
    std::string text;
    while (std::getline(input, text)) {
      if (!text.empty()) {
        window.push(std::move(text));
      }
    }
    window.close();
  }  // joins the workers: every line is written
  output.flush();
  input.tie(tied);
}

}  // namespace kvgate::app
